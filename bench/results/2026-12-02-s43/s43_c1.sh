# Session 43 call 1 (nvidia-h200): the early combine (the producer warpgroup's copy warps
# combine the tokens whose k rows are back, beside the GEMMs). Tests first, then the same
# binary with LOOM_MOE_EARLY_COMBINE=0 / 1 alternating, HEAD's binary (loom_b, f6e2af2)
# for the paths the change does not run (decode), and traces at T = 16384 and Qwen3 T = 8192.
DEADLINE=420
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t moe-single 100 $B/test_moe single
t moe-loop-special 80 $B/test_moe loopback --special
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 8"
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
for r in 1 2; do
  t pre-e0-$r 20 env LOOM_MOE_EARLY_COMBINE=0 $B/loom moe $P
  t pre-e1-$r 20 $B/loom moe $P
  t qwen-e0-$r 20 env LOOM_MOE_EARLY_COMBINE=0 $B/loom moe $Q
  t qwen-e1-$r 20 $B/loom moe $Q
done
t pre-b 20 $B/loom_b moe $P
t dec-b 20 $B/loom_b moe $D
t dec-e1 20 $B/loom moe $D
t tr16k 30 $B/loom moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/tr16k.json
t trq 30 $B/loom moe $Q --trace $OUT/trq.json
t faults-loop 60 $B/test_faults loopback
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/dec-* $OUT/tr16k.log $OUT/trq.log; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
