# Written in session 51 (as s51_c1.sh, no GPU lent then); run as session 52 call 1 on nvidia-h100-x1
# (the nvidia-h200 start was refused). The fast gate offered as config.gate_math = LOOM_GATE_FAST
# (`loom moe --gate fast`). test_moe single (every case, the 4 fast-gate cases among them, each
# token's routing checked against the fast gate's contract), then the benchmark points with
# --gate exact and --gate fast alternately, two rounds, and two checks of every token.
DEADLINE=${DEADLINE:-540}
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t test_moe 150 $B/test_moe single
G="--gpus 1 --impl fused --tokens 4096,16384 --iters 20 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
D="--gpus 1 --impl fused --tokens 1,128,512 --experts 64 --topk 8 --iters 30"
for r in 1 2; do
  for g in exact fast; do
    t grid_${g}_$r 30 $B/loom moe $G --gate $g
    t qwen3_${g}_$r 30 $B/loom moe $Q --gate $g
    t dec_${g}_$r 30 $B/loom moe $D --gate $g
  done
done
t fcheck16k 90 $B/loom moe --gpus 1 --tokens 16384 --iters 2 --check-tokens 16384 --gate fast
t fcheckq 90 $B/loom moe --gpus 1 --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 2 --check-tokens 8192 --gate fast --dtype fp16
t fp32fast 10 $B/loom moe --gpus 1 --tokens 64 --dtype fp32 --gate fast
for f in $OUT/grid* $OUT/qwen3* $OUT/dec*; do echo "== $(basename $f .log)"; grep -E "median" $f | grep fused | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; grep -c "verify: ok" $f; done >> $S
grep -h -E "fast|FAIL" $OUT/test_moe.log | tail -8 >> $S
grep -h -E "verify|gate fast|error|baseline " $OUT/fcheck*.log $OUT/fp32fast.log | cut -c1-300 | head -20 >> $S
pack; cat $S
