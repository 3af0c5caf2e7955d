# Session 34 call 7 (nvidia-h200): where the swapped tile's last ~3 us against cuBLAS go at
# 16 x 8192 x 7168 (the reduce-scatter's per-rank GEMM): ncu on the last dirty-flush launch of
# each timing (dec2 and cuBLAS), memory, scheduler and warp-state sections.
source scratch/dev_env.sh
DEADLINE=${DEADLINE:-200}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
LOOM_BENCH_PROFILE=1 t ncu_dec2 180 ncu --clock-control none --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section LaunchStats --section Occupancy $B/gemm --dtype bf16 --shape decode --variant dec2 --iters 3 --case "1x16 x8192x7168 bm64"
grep -E "^  [a-z_]|Duration|Throughput|Busy|Hit Rate|Warp Cycles|Eligible|Issued Warp|No Eligible|Active Warps|Stall" $OUT/logs/ncu_dec2.log | head -80 >> $S
pack; cat $S
