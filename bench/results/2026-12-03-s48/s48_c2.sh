# Session 48 call 2 (nvidia-h200): the gate chunk loop without its per-chunk constant loads (the
# wait-depth switch as register tests, out_in and D kept in registers): test_moe, base (18fe9e3) / new alternately.
DEADLINE=540
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv > $OUT/smi.txt 2>&1
t test_moe 170 $B/test_moe single
G="--gpus 1 --impl fused --tokens 4096,16384 --iters 20 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
D="--gpus 1 --impl fused --tokens 1,128,512 --experts 64 --topk 8 --iters 30"
V="--gpus 1 --impl fused --tokens 4096 --experts 256 --topk 8 --hidden 7168 --ffn 2048 --act swiglu --iters 5 --check-tokens 8"
for r in 1 2 3; do
  for b in base new; do
    L=$B/loom; [ $b = base ] && L=$B/loom_base
    t grid_${b}_$r 40 $L moe $G
    t qwen3_${b}_$r 40 $L moe $Q
    t dec_${b}_$r 40 $L moe $D
  done
done
for b in base new; do L=$B/loom; [ $b = base ] && L=$B/loom_base; t dsv3_$b 60 $L moe $V; t f32_$b 40 $L moe $G --dtype fp32; done
t test_seq 120 $B/test_sequence single
for f in $OUT/grid* $OUT/qwen3* $OUT/dec* $OUT/dsv3* $OUT/f32*; do echo "== $(basename $f .log)"; grep -E "verify|median" $f | grep -v "verify: ok" | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; grep -c "verify: ok" $f; done >> $S
grep -E "passed|FAIL" $OUT/test_moe.log | tail -5 >> $S
grep -E "passed|FAIL" $OUT/test_seq.log | tail -3 >> $S
pack; cat $S
