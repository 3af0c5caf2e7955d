# Session 33 call 2 (nvidia-h200): finer stamps of the engine's first task (probe build, HOP_PROBE):
# 0 entry, 1 ring init, 2 producer entry, 3 sched init (+ dg fence), 4 first task decoded,
# 5 its group's readiness fields, 6 past the readiness wait, 7 first loads issued,
# 8 consumer decode, 9 consumer first full stage, 10 mainloop end, 11 epilogue end
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t probe_smallm 150 $B/gemm_probe --dtype bf16 --shape smallm --variant w1 --iters 20
t probe_grouped 150 $B/gemm_probe --dtype bf16 --shape grouped --k 2048 --variant w1 --iters 10 --case "4x8192 x2048x2048"
grep -h "PROBE\|weights\|engine/cuBLAS" $OUT/logs/*.log | cut -c1-500 >> $S
pack
