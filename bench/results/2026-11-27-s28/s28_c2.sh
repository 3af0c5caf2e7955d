#!/bin/bash
# session 28, call 2 (4 GPUs): the all-reduce's one-shot mode. Multi-GPU tests (test_collective
# alternates LOOM_AR_ONE_SHOT automatic / 1 / 0; its fault runs cover both modes), then the
# all-reduce points: automatic (one-shot where the rule says) against two-shot forced and against
# the session's starting tree (loom_head, 12145f9), alternating; one-shot forced at larger partials
# for the crossover; the decode reduce-scatter at one rank of the same per-GPU shape for reference
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-multi 300 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
M="--check-tokens 16 --iters 40 --warmup 10"
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
F="--check-tokens 16 --iters 100 --warmup 10 --hidden 128 --ffn 256 --tokens 256"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
for r in 1 2; do
  I=fused; [ $r = 1 ] && I=both
  for v in auto two head; do
    E=X=1; L0=$B/loom
    [ $v = two ] && E=LOOM_AR_ONE_SHOT=0
    [ $v = head ] && L0=$B/loom_head
    II=fused; [ $v = auto ] && II=$I
    f ar16-$r-$v $E $L0 gemm-ar --gpus 4 --impl $II $L --tokens 16
    f arfloor-$r-$v $E $L0 gemm-ar --gpus 4 --impl $II $F
    f ar1-$r-$v $E $L0 gemm-ar --gpus 4 --impl $II $L --tokens 1 --check-tokens 1
    f ar128-$r-$v $E $L0 gemm-ar --gpus 4 --impl $II $L --tokens 128
    f mkar4k-$r-$v $E $L0 gemm-ar --gpus 4 --impl $II --tokens 4096 --hidden 256 --ffn 4096 $M
  done
  for T in 32 64 128; do f ar$T-$r-shot1 LOOM_AR_ONE_SHOT=1 $B/loom gemm-ar --gpus 4 --impl fused $L --tokens $T; done
  f ar32-$r-two LOOM_AR_ONE_SHOT=0 $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 32
  f ar64-$r-two LOOM_AR_ONE_SHOT=0 $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 64
  f mkar4k-$r-shot1 LOOM_AR_ONE_SHOT=1 $B/loom gemm-ar --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
  f rs16-$r X=1 $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 16
  f rs16g1-$r X=1 $B/loom gemm-rs --gpus 1 --impl fused --check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 7168 --tokens 16
done
for f in $OUT/logs/*-[12]*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
