# Session 41 call 5 (nvidia-h200): the 32-row swapped tile as its own kernel (moe_kernel<..., SW = 32>,
# two inlined rings like the 16-row kernel), loom_launch_moe choosing it where T R K / E > 8 rows an
# expert; against 9582141 (loom_head). test_moe single and loopback --special (ranks of one call may
# launch different kernels there), then one round of timings. Binaries built here, carried.
DEADLINE=230
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t moe-single 90 $B/test_moe single
t moe-loop-special 80 $B/test_moe loopback --special
D="--gpus 1 --impl fused --tokens 1,16,32,128 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
P="--gpus 1 --impl fused --tokens 4096 --iters 20"
for b in loom_head loom; do
  t dec-$b 15 $B/$b moe $D
  t qwen-$b 15 $B/$b moe $Q
  t pre-$b 10 $B/$b moe $P
done
for f in $OUT/dec-* $OUT/qwen-* $OUT/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
