# Session 44 call 7 (nvidia-h200): loom_h = loom_e (0dbc6b6) with SiLU's reciprocal as an
# integer seed and three Newton steps (one SFU operation an element instead of two; ~1 ulp)
# against loom_e, alternating; loom_h test_moe single (the budget left: ~280 s).
DEADLINE=230
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 8"
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
for r in 1 2; do
  t pre-e-$r 20 $B/loom_e moe $P
  t pre-h-$r 20 $B/loom_h moe $P
  t qwen-e-$r 20 $B/loom_e moe $Q
  t qwen-h-$r 20 $B/loom_h moe $Q
done
t dec-e 20 $B/loom_e moe $D
t dec-h 20 $B/loom_h moe $D
t f32-e 25 $B/loom_e moe $P --dtype fp32
t f32-h 25 $B/loom_h moe $P --dtype fp32
t moe-single 110 $B/test_moe_h single
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/dec-* $OUT/f32-* $OUT/tr*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
