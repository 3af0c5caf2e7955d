# Session 47 call 6 (nvidia-h200). Carried (scratch/, stripped): loom_e = 28f967b; loom_sk1 / loom_sk2
# (probe_sk1.diff, probe_sk2.diff; results correct, verified) = consumer WG 1 starts its first
# 128 x 256 task 1200 / 2500 clocks after WG 0 (a fixed delay), so that, if the skew lasts, one
# WG's epilogue runs beside the other's mainloop.
DEADLINE=300
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 4"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
D="--gpus 1 --impl fused --tokens 128,512 --experts 64 --topk 8 --iters 10 --check-tokens 4"
for r in 1 2; do
  for v in e sk1 sk2; do t pre-$v-$r 25 $B/loom_$v moe $P; done
  for v in e sk1 sk2; do t qwen-$v-$r 25 $B/loom_$v moe $Q; done
  for v in e sk1 sk2; do t dec-$v-$r 25 $B/loom_$v moe $D; done
done
for f in $OUT/pre-*.log $OUT/qwen-*.log $OUT/dec-*.log; do echo "$(basename $f .log): $(grep -c 'verify: ok' $f) ok; $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
