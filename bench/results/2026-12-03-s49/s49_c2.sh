# Session 49 call 2 (nvidia-h200): the gate finish's softmax one token at a time (rolled: each
# fp64 exp and the division once in the code; instructions on gate_tokens' lines in the bf16
# prefill kernel 4522 -> 1744): GPU tests, then base (loom_base = 3dd64fd, the CI build) /
# s1 (loom_s1 = c374e18, call 1's change) / new alternately.
DEADLINE=560
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t test_moe 170 $B/test_moe single
t moe_loop 200 $B/test_moe loopback --every 7
t faults_loop 100 $B/test_faults loopback
G="--gpus 1 --impl fused --tokens 4096,16384 --iters 20 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
D="--gpus 1 --impl fused --tokens 1,128,512 --experts 64 --topk 8 --iters 30"
for r in 1 2 3; do
  for b in base s1 new; do
    L=$B/loom; [ $b = base ] && L=$B/loom_base; [ $b = s1 ] && L=$B/loom_s1
    t grid_${b}_$r 40 $L moe $G
    t qwen3_${b}_$r 40 $L moe $Q
    t dec_${b}_$r 40 $L moe $D
  done
done
for f in $OUT/grid* $OUT/qwen3* $OUT/dec*; do echo "== $(basename $f .log)"; grep -E "median" $f | grep fused | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; grep -c "verify: ok" $f; done >> $S
pack; cat $S
