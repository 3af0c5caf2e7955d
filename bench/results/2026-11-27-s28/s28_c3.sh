#!/bin/bash
# session 28, call 3 (4 GPUs): the one-shot all-reduce in its own kernels (SHOT), so the two-shot
# kernels are the session's starting code again. Tests (multi; loopback R = 2, 4, 8 on GPU 3 beside
# them), then the all-reduce at decode sizes, the floor, 128 tokens and mKernel 4096: automatic
# against two-shot forced, two rounds
# alternating; the decode reduce-scatter's GEMM phase at 1, 2 and 4 GPUs (same per-GPU GEMM).
# (The carry limit left out loom_head and test_faults: the two-shot kernels' SASS is the starting
# tree's but for kernel-parameter offsets, checked here with cuobjdump; test_faults is the MoE's.)
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
(CUDA_VISIBLE_DEVICES=3 timeout 280 $B/test_collective loopback > $OUT/logs/coll-loopback.log 2>&1; echo "loopback rc=$? | $(tail -1 $OUT/logs/coll-loopback.log)" > $OUT/loopback.txt) &
t coll-multi 300 $B/test_collective multi
t seq-multi 60 $B/test_sequence multi
wait
cat $OUT/loopback.txt >> $S
M="--check-tokens 16 --iters 40 --warmup 10"
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
F="--check-tokens 16 --iters 100 --warmup 10 --hidden 128 --ffn 256 --tokens 256"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
for r in 1 2; do
  for v in auto two; do
    E=X=1; L0=$B/loom
    [ $v = two ] && E=LOOM_AR_ONE_SHOT=0
    [ $v = head ] && L0=$B/loom_head
    I=fused; [ $v = auto ] && [ $r = 1 ] && I=both
    f ar1-$r-$v $E $L0 gemm-ar --gpus 4 --impl $I $L --tokens 1 --check-tokens 1
    f ar4-$r-$v $E $L0 gemm-ar --gpus 4 --impl $I $L --tokens 4 --check-tokens 4
    f ar16-$r-$v $E $L0 gemm-ar --gpus 4 --impl $I $L --tokens 16
    f arfloor-$r-$v $E $L0 gemm-ar --gpus 4 --impl $I $F
    f ar128-$r-$v $E $L0 gemm-ar --gpus 4 --impl $I $L --tokens 128
    f mkar4k-$r-$v $E $L0 gemm-ar --gpus 4 --impl $I --tokens 4096 --hidden 256 --ffn 4096 $M
    f mkar8k-$r-$v $E $L0 gemm-ar --gpus 4 --impl $I --tokens 8192 --hidden 512 --ffn 8192 $M
  done
  f rs16g4-$r X=1 $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 16
  f rs16g2-$r X=1 $B/loom gemm-rs --gpus 2 --impl fused --check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 14336 --tokens 16
  f rs16g1-$r X=1 $B/loom gemm-rs --gpus 1 --impl fused --check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 7168 --tokens 16
done
for f in $OUT/logs/*-[12]*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
