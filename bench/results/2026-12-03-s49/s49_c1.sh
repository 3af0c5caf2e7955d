# Session 49 call 1 (nvidia-h200): the gate finish with its loops over a lane's experts rolled
# (instructions on gate_tokens' lines in the bf16 prefill kernel 10266 -> 4522; the non-finite scan inside the softmax loop):
# GPU tests, then
# base (loom_base = 3dd64fd, the CI build) / new alternately.
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
  for b in base new; do
    L=$B/loom; [ $b = base ] && L=$B/loom_base
    t grid_${b}_$r 40 $L moe $G
    t qwen3_${b}_$r 40 $L moe $Q
    t dec_${b}_$r 40 $L moe $D
  done
done
for f in $OUT/grid* $OUT/qwen3* $OUT/dec*; do echo "== $(basename $f .log)"; grep -E "median" $f | grep fused | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; grep -c "verify: ok" $f; done >> $S
pack; cat $S
