# Session 40 call 2 (nvidia-h200, the machine of call 1: build/s40 from it): the swapped-tile
# diff's correctness -- test_moe single, loopback --special, memcheck of decode calls (E = 64
# at T = 1 / 16 / 128: the 16-row, 32-row and 128 x 256 tiles) and of a call that reaches the
# 32-row tile with GEMM1 K shares (E = 4, k = 2, 48 tokens, ffn 8192), that shape fused beside
# the baseline; then HEAD's test_moe single as the control.
DEADLINE=570
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=build/s40
ls $B >> $S
t moe-single 150 $B/test_moe_swap single
t moe-loop-special 120 $B/test_moe_swap loopback --special
t memcheck-dec 120 compute-sanitizer --report-api-errors no --tool memcheck $B/loom_swap moe --gpus 1 --impl fused --tokens 1,16,128 --experts 64 --topk 8 --act swiglu --iters 2
t memcheck-32ks 90 compute-sanitizer --report-api-errors no --tool memcheck $B/loom_swap moe --gpus 1 --impl fused --tokens 48 --experts 4 --topk 2 --hidden 2048 --ffn 8192 --act swiglu --iters 2
t run-32ks 40 $B/loom_swap moe --gpus 1 --impl both --tokens 24,40,48,64 --experts 4 --topk 2 --hidden 2048 --ffn 8192 --act swiglu --iters 10
t coll-loop 200 $B/test_collective loopback
pack; cat $S
