#!/bin/bash
# session 29, call 6 (asked for one H200): TF32 dense 8192^3 at 0.87x cuBLAS in call 5, where session 6's
# v1 made 0.96x on an H200 (bench/results/2026-11-23-h200/s6b_bench_gemm_quick.log): the launch switches
# added since (PDL, L2 hints) and the raster band, each alone, on the same binary as call 5 (1a21a91's engine).
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv > $OUT/gpu.txt 2>&1
G="build/bench/gemm --dtype tf32 --shape dense --variant v1,w1 --iters 10 --case 8192x8192x8192"
for r in 1 2; do
  t tf32-$r 60 $G
  t tf32-nopdl-$r 60 $G --pdl off
  t tf32-r8-$r 60 $G --raster 8
  t tf32-r32-$r 60 $G --raster 32
  t tf32-sms128-$r 60 $G --sms 128
done
t bf16-dense 60 build/bench/gemm --dtype bf16 --shape dense --variant v1,w1 --iters 10 --case 8192x8192x8192
for f in $OUT/logs/*.log; do echo "== $(basename $f .log)"; grep "engine/cuBLAS" $f | sed 's/ *dense 8192x8192x8192//' | cut -c1-160; done >> $S
pack; cat $S
