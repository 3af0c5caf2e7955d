#!/bin/bash
# session 28, call 1 (4 GPUs): the reduce-scatter / all-reduce credit waits at the tasks' stores
# (hop_params.ready_at_store) against before their loads (LOOM_RS_STORE_GATE=0), alternating;
# the multi-GPU tests first
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-multi 240 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
M="--check-tokens 16 --iters 40 --warmup 10"
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
F="--check-tokens 16 --iters 100 --warmup 10 --hidden 128 --ffn 256 --tokens 256"
f() { local n=$1 g=$2 I=$3; shift 3; t $n-g$g 40 env LOOM_RS_STORE_GATE=$g "$@"; }
for r in 1 2; do
  for g in 1 0; do
    I=fused; [ $r = 1 ] && [ $g = 1 ] && I=both
    f mkrs4k-$r $g $I $B/loom gemm-rs --gpus 4 --impl $I --tokens 4096 --hidden 256 --ffn 4096 $M
    f mkar4k-$r $g $I $B/loom gemm-ar --gpus 4 --impl $I --tokens 4096 --hidden 256 --ffn 4096 $M
    f mkrs8k-$r $g $I $B/loom gemm-rs --gpus 4 --impl $I --tokens 8192 --hidden 512 --ffn 8192 $M
    f mkar8k-$r $g $I $B/loom gemm-ar --gpus 4 --impl $I --tokens 8192 --hidden 512 --ffn 8192 $M
    f rs16-$r $g $I $B/loom gemm-rs --gpus 4 --impl $I $L --tokens 16
    f ar16-$r $g $I $B/loom gemm-ar --gpus 4 --impl $I $L --tokens 16
    f rs128-$r $g $I $B/loom gemm-rs --gpus 4 --impl $I $L --tokens 128
    f ar128-$r $g $I $B/loom gemm-ar --gpus 4 --impl $I $L --tokens 128
    f ar256-$r $g $I $B/loom gemm-ar --gpus 4 --impl $I $L --tokens 256
    f rsfloor-$r $g $I $B/loom gemm-rs --gpus 4 --impl $I $F
    f arfloor-$r $g $I $B/loom gemm-ar --gpus 4 --impl $I $F
  done
done
for f in $OUT/logs/*-[12]-g*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
