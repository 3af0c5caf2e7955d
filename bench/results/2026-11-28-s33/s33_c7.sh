# Session 33 call 7 (nvidia-h200): what cuBLAS runs for the decode-sized one-weight GEMM
# (ncu on the last dirty-flush launch of each timing: engine w1 and cuBLAS), 1 and 16 rows.
source scratch/dev_env.sh
B=scratch/bin
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__registers_per_thread,sm__throughput.avg.pct_of_peak_sustained_elapsed
for c in "1x1 x8192x14336 bm64" "1x16 x8192x14336 bm64" "1x16 x8192x7168 bm64"; do
  n=$(echo "$c" | tr ' ' '_')
  LOOM_BENCH_PROFILE=1 t ncu_$n 120 ncu --clock-control none --profile-from-start off --metrics $M $B/gemm --dtype bf16 --shape decode --variant w1,sk2 --iters 3 --case "$c"
done
pack
