# Session 33 call 9 (nvidia-h200): the swapped tile with 128 weight rows a task (hop_dec2, variant
# dec2) beside dec and w1: every small-config check of both, then small-M and decode timings.
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t check_dec 150 $B/gemm --check-only --variant dec,dec2
t sm_time 100 $B/gemm --dtype bf16 --shape smallm --variant w1,dec,dec2 --iters 20
t dec_time 150 $B/gemm --dtype bf16 --shape decode --variant w1,dec,dec2 --iters 20
grep -h "all results match\|bad)" $OUT/logs/check_dec.log | grep -v " 0 bad" | head -20 >> $S
pack
