# NOTE (call 10): the loom_p* binaries this call ran were mislinked (HEAD's moe.o stayed in
# libloom.a); they were HEAD. See bench/RESULTS.md session 45 (c).
# Session 45 call 9 (nvidia-h200): does loom_p3 (no epilogue: never writes h) inherit the
# previous process's h? Runs in a crossed order: each loom_p3 run follows a loom_e run with a
# different --act than its own (RESULTS session 45 (j)).
DEADLINE=150
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
export LOOM_PROBE_NOVERIFY=1
: > $S
B=scratch/bin
A="--gpus 1 --impl fused --tokens 16384 --iters 10 --check-tokens 4"
for r in 1 2; do
  t gelu-e-$r 20 $B/loom_e moe $A --act gelu
  t relu-p3-after-gelu-$r 20 $B/loom_p3 moe $A --act relu
  t relu-e-$r 20 $B/loom_e moe $A --act relu
  t gelu-p3-after-relu-$r 20 $B/loom_p3 moe $A --act gelu
  t silu-e-$r 20 $B/loom_e moe $A --act silu
  t gelu-p3-after-silu-$r 20 $B/loom_p3 moe $A --act gelu
done
for f in $OUT/*.log; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/')"; done >> $S
pack; cat $S
