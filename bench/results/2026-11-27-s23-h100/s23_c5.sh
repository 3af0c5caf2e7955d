#!/bin/bash
# session 23, call 5 (4 GPUs): issue 12's grid (bench/collective_grid.sh) on
# this tree, every point verified, fused beside NCCL + cuBLAS.
export NCCL_NVLS_ENABLE=0
tar xJf scratch/carry.tar.xz
mkdir -p build && cp scratch/bin/loom build/loom
bash bench/collective_grid.sh $OUT/grid 4 > $OUT/grid.log 2>&1; echo "grid rc=$?"
grep -E "^== |fused +median|baseline +median|FAILED|collective-grid" $OUT/grid.log | sed 's/ TFLOP.*phases end at/ | /' | cut -c1-160
(cd $OUT && tar cJf grid.tar.xz grid && rm -rf grid)
