# Session 43 call 2 (nvidia-h200): the early combine with streaming (evict-first) y stores
# and no empty trace batches. Timings first (same binary, LOOM_MOE_EARLY_COMBINE=0 / 1,
# and HEAD's loom_b), then a trace at T = 16384 and test_moe single.
DEADLINE=300
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 8"
for r in 1 2; do
  t pre-b-$r 20 $B/loom_b moe $P
  t pre-e0-$r 20 env LOOM_MOE_EARLY_COMBINE=0 $B/loom moe $P
  t pre-e1-$r 20 $B/loom moe $P
  t qwen-b-$r 20 $B/loom_b moe $Q
  t qwen-e0-$r 20 env LOOM_MOE_EARLY_COMBINE=0 $B/loom moe $Q
  t qwen-e1-$r 20 $B/loom moe $Q
done
t tr16k 30 $B/loom moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/tr16k.json
t moe-single 100 $B/test_moe single
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/tr16k.log; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
