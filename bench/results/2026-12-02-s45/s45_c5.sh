# Session 45 call 5 (nvidia-h200): ncu's speed-of-light, compute and memory workload sections
# for one moe_kernel launch of HEAD 6054f26 (loom_e) at T = 16384 (E = 32, k = 2, H = F =
# 2048, bf16): the SM clock during the launch, the tensor pipe's and shared memory's
# utilisation, to decide between RESULTS session 45 (c)'s two readings.
DEADLINE=300
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
t ncu-sol 150 $NCU --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
   --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
   --section MemoryWorkloadAnalysis_Tables --section LaunchStats -o $OUT/sol \
   $B/loom_e moe --gpus 1 --impl fused --iters 1 --warmup 2 --check-tokens 4 --tokens 16384
[ -f $OUT/sol.ncu-rep ] && $NCU -i $OUT/sol.ncu-rep --page details --print-details all > $OUT/sol_details.txt 2>&1
$NCU --query-metrics 2>/dev/null | grep -i "gmma\|pipe_tensor\|cycles_elapsed\|shared" | head -60 > $OUT/metrics.txt
grep -iE "Frequency|Duration|Elapsed Cycles|Tensor|Shared|Throughput|Pipe|L1/TEX|L2 Cache|DRAM|Bank" $OUT/sol_details.txt | head -80 >> $S
rm -f $OUT/sol.ncu-rep
pack; cat $S
