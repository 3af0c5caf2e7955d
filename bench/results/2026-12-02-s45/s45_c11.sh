# Session 45 call 11 (nvidia-h200): loom_p2 = HEAD 6054f26 without the epilogue's quad
# transposes (words stored untransposed; results wrong, probe harness; linked through libloom.a
# as call 10's probes), against loom_e, alternating: the transposes' share of the epilogue.
DEADLINE=150
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
export LOOM_PROBE_NOVERIFY=1
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 4"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
for r in 1 2; do
  for v in e p2; do t pre-$v-$r 20 $B/loom_$v moe $P; done
  for v in e p2; do t qwen-$v-$r 20 $B/loom_$v moe $Q; done
done
for f in $OUT/*.log; do echo "$(basename $f .log): $(grep -c 'verify: FAILED' $f) failed verify; $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
