# Session 50 call 1 (nvidia-h200): A2 (softmax exp once a logit, uniform trip count) with its
# test_moe single; the gate on 16-bit HMMA with fp32 accumulation (probe h = A2 + GATE_HMMA=1:
# routing no longer exact, so its test_moe run counts what the exact checks catch);
# base (ba86ab3) / a2 / h alternately, two rounds.
DEADLINE=${DEADLINE:-420}
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t test_moe_a2 100 $B/test_moe_a2 single
G="--gpus 1 --impl fused --tokens 4096,16384 --iters 20 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
D="--gpus 1 --impl fused --tokens 1,128,512 --experts 64 --topk 8 --iters 30"
for r in 1 2; do
  for b in base a2 h; do
    L=$B/loom_$b
    t grid_${b}_$r 30 $L moe $G
    t qwen3_${b}_$r 30 $L moe $Q
    t dec_${b}_$r 30 $L moe $D
  done
done
t hcheck16k 60 $B/loom_h moe --gpus 1 --impl fused --tokens 16384 --iters 2 --check-tokens 16384
t hcheckq 60 $B/loom_h moe --gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 2 --check-tokens 8192
t test_moe_h 90 $B/test_moe_h single
t faults_a2 40 $B/test_faults_a2 loopback
for f in $OUT/grid* $OUT/qwen3* $OUT/dec*; do echo "== $(basename $f .log)"; grep -E "median" $f | grep fused | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; grep -c "verify: ok" $f; done >> $S
grep -h -E "FAIL|fail|mismatch|differ" $OUT/test_moe_h.log | head -20 >> $S
grep -h -E "verify|error|routing" $OUT/hcheck*.log | head -10 >> $S
pack; cat $S
