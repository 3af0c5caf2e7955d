# Session 44 call 2 (nvidia-h200): where the gap between two GEMM slices of an SM goes.
# loom_p = HEAD with every wait recorded (LOOM_MOE_TRACE_MIN_WAIT_NS 0) and two probe
# slices in the 128 x 256 consumer loop (kind wait-return, tile -1: the epilogue; tile -2:
# the signal post after it); traces at T = 4096, 16384 and the Qwen3 shape.
DEADLINE=200
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 5 --check-tokens 8"
t trp 30 $B/loom_p moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/trp.json
t trp4 30 $B/loom_p moe --gpus 1 --impl fused --tokens 4096 --iters 5 --check-tokens 8 --trace $OUT/trp4.json
t trpq 30 $B/loom_p moe $Q --trace $OUT/trpq.json
gzip $OUT/*.json
pack; cat $S
