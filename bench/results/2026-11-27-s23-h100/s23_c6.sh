#!/bin/bash
# session 23, call 6 (1 GPU): where the fused reduce-scatter's GEMM phase at
# decode sizes goes: ncu durations and DRAM bytes of the one-rank fused
# kernel beside the engine alone on the same weights (1 x 16 x 8192 x 7168).
source scratch/dev_env.sh
B=scratch/bin
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,smsp__cycles_active.avg"
t ncu-rs 120 ncu --clock-control none -k regex:rs_gemm_kernel --launch-skip 20 --launch-count 3 --metrics $M \
  $B/loom gemm-rs --gpus 1 --impl fused --check-tokens 4 --iters 30 --warmup 5 --tokens 16 --hidden 8192 --ffn 7168
LOOM_BENCH_PROFILE=1 t ncu-eng 120 ncu --clock-control none --profile-from-start off -k regex:hop_gemm_kernel --metrics $M \
  $B/gemm --dtype bf16 --shape decode --variant w1 --case "decode 1x16 x8192x7168 bm64" --iters 3
t rs-plain 40 $B/loom gemm-rs --gpus 1 --impl both --check-tokens 4 --iters 50 --warmup 10 --tokens 16 --hidden 8192 --ffn 7168
LOOM_RS_SLICES=1 t rs-sl1 40 $B/loom gemm-rs --gpus 1 --impl fused --check-tokens 4 --iters 50 --warmup 10 --tokens 16 --hidden 8192 --ffn 7168
grep -E "rs_gemm_kernel|hop_gemm_kernel|gpu__time|dram__|sm__cycles|smsp__cycles" $OUT/logs/ncu-rs.log $OUT/logs/ncu-eng.log | sed 's/  */ /g' | cut -c1-160 >> $S
grep -h "median" $OUT/logs/rs-*.log >> $S
pack; cat $S
