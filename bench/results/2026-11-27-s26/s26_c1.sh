#!/bin/bash
# session 26, call 1 (1 GPU): where the decode-sized collective GEMM's time goes at one rank
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv > $OUT/logs/smi.txt 2>&1
which nsys ncu >> $OUT/logs/smi.txt 2>&1
L="--hidden 8192 --ffn 7168 --tokens 16 --check-tokens 16 --iters 50 --warmup 10"
t ag16 120 build/loom ag-gemm --gpus 1 --impl both $L
t rs16 120 build/loom gemm-rs --gpus 1 --impl both --hidden 7168 --ffn 8192 --tokens 16 --check-tokens 16 --iters 50 --warmup 10
t ag16-pp 120 env LOOM_AG_TILE=narrow build/loom ag-gemm --gpus 1 --impl fused $L
t gemm-dec 200 build/bench/gemm --dtype bf16 --shape decode --variant w1 --iters 20
t gemm-dec-nopdl 200 build/bench/gemm --dtype bf16 --shape decode --variant w1 --iters 20 --pdl off
if which nsys > /dev/null 2>&1; then
  t nsys 200 nsys profile -o $OUT/ag16 --force-overwrite true -t cuda build/loom ag-gemm --gpus 1 --impl both $L
  t nsys-stats 120 nsys stats --report cuda_gpu_kern_sum --report cuda_gpu_trace --format csv -o $OUT/logs/ag16 $OUT/ag16.nsys-rep
  rm -f $OUT/ag16.nsys-rep $OUT/ag16.sqlite
  gzip $OUT/logs/ag16*gpu_trace*.csv 2>/dev/null
fi
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__cycles_active.avg,launch__grid_size
t ncu-ag 300 ncu --clock-control none --cache-control none --launch-skip 30 --launch-count 6 --metrics $M build/loom ag-gemm --gpus 1 --impl both $L
pack
