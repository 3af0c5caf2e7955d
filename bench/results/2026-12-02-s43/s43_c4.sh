# Session 43 call 4 (nvidia-h200): the combine with 6 or 8 output vectors a thread in flight
# (COMBINE_U, was 4): loom_u6 / loom_u8 against HEAD (loom_b) alternating; traces at
# T = 16384; test_moe single of both.
DEADLINE=420
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 8"
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
M="--gpus 1 --impl fused --tokens 1,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10 --check-tokens 8"
F="--gpus 1 --impl fused --tokens 16384 --dtype fp32 --iters 5 --check-tokens 8"
for r in 1 2; do
  for v in b u6 u8; do t pre-$v-$r 20 $B/loom_$v moe $P; t qwen-$v-$r 20 $B/loom_$v moe $Q; done
done
for v in b u6 u8; do t dec-$v 20 $B/loom_$v moe $D; t mix-$v 25 $B/loom_$v moe $M; t f32-$v 25 $B/loom_$v moe $F; done
for v in b u6 u8; do t tr-$v 30 $B/loom_$v moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/tr$v.json; done
t single-u6 100 $B/test_moe_u6 single
t single-u8 100 $B/test_moe_u8 single
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/dec-* $OUT/mix-* $OUT/f32-* $OUT/tr-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
