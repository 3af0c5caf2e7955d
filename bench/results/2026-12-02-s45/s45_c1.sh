# Session 45 call 1 (nvidia-h200): loom_e = HEAD 6054f26; loom_h = SiLU's reciprocal by an
# integer seed and three Newton steps (session 44's silu_newton.diff); loom_d = loom_h with
# the 128 x 256 tile's 16-bit epilogue held across the task boundary (rounded words kept in
# registers, transposes and row stores in the next task's first two k-block iterations).
# Alternating timings; a trace of loom_d; loom_d's GPU tests.
DEADLINE=540
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 8"
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
M="--gpus 1 --impl fused --tokens 1,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10 --check-tokens 8"
t moe-single-d 120 $B/test_moe_d single
for r in 1 2; do
  for v in e h d; do t pre-$v-$r 20 $B/loom_$v moe $P; done
  for v in e h d; do t qwen-$v-$r 20 $B/loom_$v moe $Q; done
done
for v in e h d; do t dec-$v 20 $B/loom_$v moe $D; done
for v in e d; do t mix-$v 25 $B/loom_$v moe $M; done
for v in e h; do t f32-$v 25 $B/loom_$v moe $P --dtype fp32; done
t tr-d 30 $B/loom_d moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/trd.json
t trq-d 30 $B/loom_d moe $Q --trace $OUT/trqd.json
t moe-loop-special-d 90 $B/test_moe_d loopback --special
t faults-loop-d 40 $B/test_faults_d loopback
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/dec-* $OUT/mix-* $OUT/f32-* $OUT/tr*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
