# Session 33 call 1 (nvidia-h200): the engine's small-M launch stamped (probe build, HOP_PROBE)
# beside the plain build. Binaries built here and carried (scratch/carry.tar.xz).
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t gemm_smallm 150 $B/gemm --dtype bf16 --shape smallm --variant w1,v1 --iters 20
t probe_smallm 150 $B/gemm_probe --dtype bf16 --shape smallm --variant w1 --iters 20
t probe_grouped 150 $B/gemm_probe --dtype bf16 --shape grouped --k 2048 --variant w1 --iters 10
t probe_stream 60 $B/probe_stream
grep -h "PROBE\|weights\|engine/cuBLAS" $OUT/logs/*.log | cut -c1-400 >> $S
pack
