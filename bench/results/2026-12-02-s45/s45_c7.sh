# Session 45 call 7 (nvidia-h200): is ReLU's 2.6% over SiLU (RESULTS session 45 (d), (h)) the
# device's or the run's? HEAD 6054f26 (loom_e) at T = 16384, --act relu / silu alternating,
# with the default verify (8 tokens), a 1-token verify, and 200 warm-up forwards before the
# 10 timed ones; the SM clock sampled beside them.
DEADLINE=240
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv,noheader -lms 20 > $OUT/smi.csv &
SMI=$!
for r in 1 2; do
  for a in relu silu; do
    t $a-c8-$r 20 $B/loom_e moe --gpus 1 --impl fused --tokens 16384 --iters 10 --check-tokens 8 --act $a
    t $a-c1-$r 20 $B/loom_e moe --gpus 1 --impl fused --tokens 16384 --iters 10 --check-tokens 1 --act $a
    t $a-w200-$r 30 $B/loom_e moe --gpus 1 --impl fused --tokens 16384 --iters 10 --warmup 200 --check-tokens 1 --act $a
  done
done
kill $SMI; wait $SMI 2>/dev/null
awk -F', ' '$4+0 >= 90 {n++; s+=$2} END {if (n) printf "busy samples %d, SM clock mean %.0f MHz\n", n, s/n}' $OUT/smi.csv >> $S
pack; cat $S
