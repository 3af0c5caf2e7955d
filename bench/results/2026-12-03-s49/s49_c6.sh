# Session 49 call 6 (nvidia-h200): A made correct (A2.diff: the softmax loop's trip count the same on
# every lane, so its full-warp shuffle is reached by all 32): test_moe single (E = 1 ... 1024),
# then base (loom_base = 4275e65) / new alternately, two rounds; then the loopback tests if time is left.
DEADLINE=${DEADLINE:-200}
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t test_moe 100 $B/test_moe single
G="--gpus 1 --impl fused --tokens 4096,16384 --iters 20 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
D="--gpus 1 --impl fused --tokens 1,128,512 --experts 64 --topk 8 --iters 30"
for r in 1 2; do
  for b in base new; do
    L=$B/loom; [ $b = base ] && L=$B/loom_base
    t grid_${b}_$r 30 $L moe $G
    t qwen3_${b}_$r 30 $L moe $Q
    t dec_${b}_$r 30 $L moe $D
  done
done
t faults_loop 40 $B/test_faults loopback
t moe_loop 90 $B/test_moe loopback --every 7
for f in $OUT/grid* $OUT/qwen3* $OUT/dec*; do echo "== $(basename $f .log)"; grep -E "median" $f | grep fused | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; grep -c "verify: ok" $f; done >> $S
pack; cat $S
