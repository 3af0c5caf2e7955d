# Session 50 calls 2 and 3 (nvidia-h200): the fast gate behind a runtime switch
# (gate_fast_runtime.diff, LOOM_MOE_GATE_FAST=1): test_moe single on its exact path, then
# base (ba86ab3) / rt exact / rt fast alternately, two rounds: what the extra spills cost the
# exact path. Call 2's rt binaries were mislinked (host moe.o built against the old moe.h);
# call 3 reran this script with the host object rebuilt.
DEADLINE=${DEADLINE:-300}
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t test_moe_rt 100 $B/test_moe_rt single
G="--gpus 1 --impl fused --tokens 4096,16384 --iters 20 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
D="--gpus 1 --impl fused --tokens 1,128,512 --experts 64 --topk 8 --iters 30"
for r in 1 2; do
  for b in base rt fast; do
    L=$B/loom_$b; F=0; [ $b = fast ] && { L=$B/loom_rt; F=1; }
    t grid_${b}_$r 30 env LOOM_MOE_GATE_FAST=$F $L moe $G
    t qwen3_${b}_$r 30 env LOOM_MOE_GATE_FAST=$F $L moe $Q
    t dec_${b}_$r 30 env LOOM_MOE_GATE_FAST=$F $L moe $D
  done
done
for f in $OUT/grid* $OUT/qwen3* $OUT/dec*; do echo "== $(basename $f .log)"; grep -E "median" $f | grep fused | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; grep -c "verify: ok" $f; done >> $S
pack; cat $S
