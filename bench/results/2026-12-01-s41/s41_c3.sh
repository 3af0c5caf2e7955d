# Session 41 call 3 (nvidia-h200): call 2 again after the kernel parameters became __grid_constant__ (call 2:
# the out-of-line roles took their address, so they were copied to local memory; every phase
# slower). The 32-row swapped tile (moe_swap<MATH, 32>: m64n32, 8 stages of
# 20 KB) beside the 16-row one, both swapped rings' roles out of line (moe_swap_roles, no
# setmaxnreg), against 9582141 (loom_head). Tests and memcheck of the new build first, then
# alternating timings: E = 64 decode, Qwen3-shaped decode, Mixtral-like decode, prefill T = 4096
# as the 128 x 256 control; LOOM_MOE_SWAP=16 on the new binary = the 16-row tile only.
# Binaries built here (make build/loom build/tests/test_moe; loom_head linked from 9582141's
# moe.o and the same other objects) and carried in scratch/carry.tar.xz.
DEADLINE=570
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader >> $S
t moe-single 150 $B/test_moe single
t moe-loop-special 120 $B/test_moe loopback --special
t memcheck-dec 120 compute-sanitizer --report-api-errors no --tool memcheck $B/loom moe --gpus 1 --impl fused --tokens 1,16,128 --experts 64 --topk 8 --act swiglu --iters 2
t memcheck-32ks 90 compute-sanitizer --report-api-errors no --tool memcheck $B/loom moe --gpus 1 --impl fused --tokens 48 --experts 4 --topk 2 --hidden 2048 --ffn 8192 --act swiglu --iters 2
t run-32ks 40 $B/loom moe --gpus 1 --impl both --tokens 24,40,48,64 --experts 4 --topk 2 --hidden 2048 --ffn 8192 --act swiglu --iters 10
D="--gpus 1 --impl fused --tokens 1,16,32,128 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
M="--gpus 1 --impl fused --tokens 1,4,16 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
P="--gpus 1 --impl fused --tokens 4096 --iters 20"
for r in 1 2; do
  for b in loom_head loom swap16; do
    x=$b; e=""
    [ $b = swap16 ] && { x=loom; e="env LOOM_MOE_SWAP=16"; }
    t dec-$b-$r 40 $e $B/$x moe $D
    t qwen-$b-$r 30 $e $B/$x moe $Q
    t mix-$b-$r 40 $e $B/$x moe $M
    t pre-$b-$r 30 $e $B/$x moe $P
  done
done
for f in $OUT/dec-* $OUT/qwen-* $OUT/mix-* $OUT/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
