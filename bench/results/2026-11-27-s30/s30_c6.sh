#!/bin/bash
# session 30, call 6 (4x H100): the tagged path compiled into the decode tile's kernels only (CI's
# sass-check found a spill reload in the 128 x 256 reduce-scatter kernels' k-block loop with it in
# every kernel): test_collective multi and loopback, then the decode points beside NCCL + cuBLAS.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-multi 200 $B/test_collective multi
t coll-loop 300 $B/test_collective loopback
L="--check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 28672"
F="--check-tokens 16 --iters 100 --warmup 10 --hidden 128 --ffn 256 --tokens 256"
t rs16 60 $B/loom gemm-rs --gpus 4 --impl both $L --tokens 16
t ar1 60 $B/loom gemm-ar --gpus 4 --impl both $L --tokens 1
t ar16 60 $B/loom gemm-ar --gpus 4 --impl both $L --tokens 16
t arfloor 60 $B/loom gemm-ar --gpus 4 --impl both $F
t rs16g 60 $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 16
for f in $OUT/logs/rs16.log $OUT/logs/ar1.log $OUT/logs/ar16.log $OUT/logs/arfloor.log $OUT/logs/rs16g.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s | ", $2, $3, $11}')"; done >> $S
pack; cat $S
