#!/bin/bash
# session 26, call 2 (1 GPU): the fused decode GEMM at one rank against the engine alone: which of the
# grid (132 blocks against the tasks), the first-come dynamic order, the maps' prefetch costs the time
source scratch/dev_env.sh
L="--hidden 8192 --ffn 7168 --tokens 16 --check-tokens 16 --iters 60 --warmup 10"
for r in 1 2; do
  t ag-def-$r 60 build/loom ag-gemm --gpus 1 --impl both $L
  t ag-first-$r 60 env LOOM_DYN_FIRST=1 build/loom ag-gemm --gpus 1 --impl fused $L
  t ag-pf-$r 60 env LOOM_MAPS_PREFETCH=1 build/loom ag-gemm --gpus 1 --impl fused $L
  t ag-g56-$r 60 env LOOM_COLL_GRID=56 build/loom ag-gemm --gpus 1 --impl fused $L
  t ag-g56first-$r 60 env LOOM_COLL_GRID=56 LOOM_DYN_FIRST=1 build/loom ag-gemm --gpus 1 --impl fused $L
  t ag-all-$r 60 env LOOM_DYN_FIRST=1 LOOM_MAPS_PREFETCH=1 build/loom ag-gemm --gpus 1 --impl fused $L
done
L2="--hidden 7168 --ffn 8192 --tokens 16 --check-tokens 16 --iters 60 --warmup 10"
t rs-def 60 build/loom gemm-rs --gpus 1 --impl both $L2
t rs-first 60 env LOOM_DYN_FIRST=1 build/loom gemm-rs --gpus 1 --impl fused $L2
t rs-g64 60 env LOOM_COLL_GRID=64 build/loom gemm-rs --gpus 1 --impl fused $L2
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,launch__grid_size
t ncu-first 200 env LOOM_DYN_FIRST=1 ncu --clock-control none --cache-control none --launch-skip 30 --launch-count 3 --metrics $M build/loom ag-gemm --gpus 1 --impl fused $L
t ncu-g56 200 env LOOM_COLL_GRID=56 ncu --clock-control none --cache-control none --launch-skip 30 --launch-count 3 --metrics $M build/loom ag-gemm --gpus 1 --impl fused $L
for f in $OUT/logs/ag-*.log $OUT/logs/rs-*.log; do echo "$(basename $f): $(grep -h 'median' $f | tr '\n' ' ')"; done >> $S
pack
