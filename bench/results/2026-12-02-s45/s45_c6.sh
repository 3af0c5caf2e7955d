# NOTE (call 10): the loom_p* binaries this call ran were mislinked (HEAD's moe.o stayed in
# libloom.a); they were HEAD. See bench/RESULTS.md session 45 (c).
# Session 45 call 6 (nvidia-h200): loom_p3 = HEAD 6054f26 with no 16-bit epilogue at all in
# the 128 x 256 consumers (no conversions, no stores; the post to the signaler kept; results
# wrong, timed past the failed verify with the probe harness), against loom_e, alternating,
# and a trace of each at T = 16384: how much of a task's ~3.9 us beside its mainloop is the
# epilogue at all.
DEADLINE=200
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
export LOOM_PROBE_NOVERIFY=1
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 4"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
for r in 1 2; do
  for v in e p3; do t pre-$v-$r 20 $B/loom_$v moe $P; done
  for v in e p3; do t qwen-$v-$r 20 $B/loom_$v moe $Q; done
done
for v in e p3; do t relu-$v 20 $B/loom_$v moe --gpus 1 --impl fused --tokens 16384 --iters 10 --check-tokens 4 --act relu; done
for v in e p3; do t tr-$v 30 $B/loom_$v moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 4 --trace $OUT/tr$v.json; done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/relu-* $OUT/tr-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
