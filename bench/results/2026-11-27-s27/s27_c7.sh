#!/bin/bash
# session 27, call 7 (4 GPUs): the final tree's all-reduce slices (rs_slices, R >= 4) against the old
# rule's choice forced (LOOM_RS_SLICES), alternating, at the three points where they differ
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
M="--check-tokens 16 --iters 40 --warmup 10"
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
for r in 1 2; do
  I=fused; [ $r = 1 ] && I=both
  f ar128-new-$r X=1 $B/loom gemm-ar --gpus 4 --impl $I $L --tokens 128
  f ar128-old-$r LOOM_RS_SLICES=2 $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 128
  f ar256-new-$r X=1 $B/loom gemm-ar --gpus 4 --impl $I $L --tokens 256
  f ar256-old-$r LOOM_RS_SLICES=4 $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 256
  f mkar8k-new-$r X=1 $B/loom gemm-ar --gpus 4 --impl $I --tokens 8192 --hidden 512 --ffn 8192 $M
  f mkar8k-old-$r LOOM_RS_SLICES=4 $B/loom gemm-ar --gpus 4 --impl fused --tokens 8192 --hidden 512 --ffn 8192 $M
done
for f in $OUT/logs/*-[12].log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
