# Session 45 call 3 (nvidia-h200): the combine with more loads in flight: loom_u6 / loom_u8 =
# HEAD 6054f26 with COMBINE_U 6 / 8 (16-byte vectors a thread sums at once, each with
# COMBINE_JB = 2 routing slots' loads in flight) against loom_e (COMBINE_U 4), alternating;
# traces at T = 16384; both variants' GPU tests.
DEADLINE=560
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 8"
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
M="--gpus 1 --impl fused --tokens 1,128,2048 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10 --check-tokens 8"
for r in 1 2; do
  for v in e u6 u8; do t pre-$v-$r 20 $B/loom_$v moe $P; done
  for v in e u6 u8; do t qwen-$v-$r 20 $B/loom_$v moe $Q; done
done
for v in e u6 u8; do t dec-$v 20 $B/loom_$v moe $D; done
for v in e u6 u8; do t mix-$v 30 $B/loom_$v moe $M; done
for v in e u6 u8; do t f32-$v 25 $B/loom_$v moe $P --dtype fp32; done
for v in e u6 u8; do t tr-$v 30 $B/loom_$v moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/tr$v.json; done
for v in u8 u6; do
  t moe-single-$v 120 $B/test_moe_$v single
  t moe-loop-special-$v 90 $B/test_moe_$v loopback --special
  t faults-loop-$v 40 $B/test_faults_$v loopback
done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/dec-* $OUT/mix-* $OUT/f32-* $OUT/tr-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
