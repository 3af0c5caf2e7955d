#!/bin/bash
# session 27, call 4 (4 GPUs): issue 12's grid on this tree (the all-gather's bulk pushes of
# ccbf24a), then the all-reduce's side-role knobs at the points where it is slower than NCCL +
# cuBLAS (mKernel 4096 / 8192, 256 tokens): slices per tile, column chunks (diagnostics only)
source scratch/dev_env.sh
B=scratch/bin
mkdir -p build && cp $B/loom build/loom
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t grid 280 bash bench/collective_grid.sh $OUT/grid 4
(cd $OUT && tar czf grid.tgz grid && rm -rf grid)
M="--check-tokens 16 --iters 40 --warmup 10"
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
for e in X=1 LOOM_RS_SLICES=1 LOOM_RS_SLICES=2 LOOM_RS_SLICES=4 LOOM_RS_SLICES=8 LOOM_RS_CHUNKS=1 LOOM_RS_CHUNKS=2 LOOM_RS_CHUNKS=4; do
  n=$(echo $e | tr -d '_=' | tr 'A-Z' 'a-z' | sed 's/loomrs//')
  I=fused; [ $e = X=1 ] && I=both
  f mkar4k-$n-1 $e $B/loom gemm-ar --gpus 4 --impl $I --tokens 4096 --hidden 256 --ffn 4096 $M
  f mkar8k-$n-1 $e $B/loom gemm-ar --gpus 4 --impl $I --tokens 8192 --hidden 512 --ffn 8192 $M
  f ar256-$n-1 $e $B/loom gemm-ar --gpus 4 --impl $I $L --tokens 256
done
for f in $OUT/logs/*-1.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
