#!/bin/bash
# session 31, call 1 (1 GPU): why the mKernel M = 4096 reduce-scatter's GEMM phase takes ~14 us for a
# 4096 x 256 x 1024 GEMM per rank (4 GPUs) / x 2048 (2 GPUs): the same per-rank GEMM at world size 1,
# both tiles, beside cuBLAS; ncu sections of the fused kernel and of cuBLAS's.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
P="--check-tokens 16 --iters 100 --warmup 10 --hidden 256 --tokens 4096"
for k in 1024 2048; do
  for tile in narrow wide; do
    LOOM_AG_TILE=$tile t rs-k$k-$tile 60 $B/loom gemm-rs --gpus 1 --impl both $P --ffn $k
  done
done
SEC="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats --section LaunchStats --section Occupancy"
t ncu-fused 180 ncu --clock-control none -k regex:rs_gemm_kernel --launch-skip 10 --launch-count 1 $SEC -o $OUT/fused $B/loom gemm-rs --gpus 1 --impl fused --check-tokens 16 --iters 20 --warmup 5 --hidden 256 --tokens 4096 --ffn 1024
t ncu-cublas 180 ncu --clock-control none -k regex:"nvjet|gemm|xmma|cutlass" --launch-skip 10 --launch-count 1 $SEC -o $OUT/cublas $B/loom gemm-rs --gpus 1 --impl baseline --check-tokens 16 --iters 20 --warmup 5 --hidden 256 --tokens 4096 --ffn 1024
for r in fused cublas; do ncu --import $OUT/$r.ncu-rep --print-summary none > $OUT/logs/$r-details.txt 2>&1; done
for f in $OUT/logs/rs-*.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)|phases' $f | tr -s ' ' | cut -c1-200 | tr '\n' '|')"; done >> $S
grep -E "^  [a-zA-Z_]+.*(nvjet|rs_gemm|gemm)|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|L2 Hit|Issue Slots|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Block Size|Grid Size" $OUT/logs/fused-details.txt $OUT/logs/cublas-details.txt | cut -c1-200 >> $S
pack; cat $S
