# Session 48 call 4 (nvidia-h200): is the gate's pass barrier paying for H = 2048's uneven chunks?
# 64 chunks of 32 over 12 warps = 6 for warps 0-3, 5 for the rest; H = 1920 (60 = 12 x 5) and
# 2304 (72 = 12 x 6) are even. If the barrier waits on the 6-chunk warps, the gate at 2048 costs
# about what 2304 does. Final tree's loom (c8562d4 device code); gate end from the CLI's phases.
DEADLINE=300
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
for r in 1 2; do
  for h in 1920 2048 2304; do
    t g${h}_$r 40 $B/loom moe --gpus 1 --impl fused --tokens 16384 --hidden $h --iters 10 --check-tokens 4
    t q${h}_$r 40 $B/loom moe --gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --hidden $h --iters 10 --check-tokens 4
  done
done
for f in $OUT/g*.log $OUT/q*.log; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at gate \([0-9]*\).*/median \1 gate \2/')"; grep -c "verify: ok" $f; done >> $S
pack; cat $S
