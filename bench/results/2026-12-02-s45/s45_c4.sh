# Session 45 call 4 (nvidia-h200): the SM clock while the fused layer runs (HEAD 6054f26,
# loom_e): nvidia-smi sampled every 50 ms beside a long run at T = 16384 and on the Qwen3 shape,
# to turn the expert tasks' operand rate (RESULTS session 45 (c)) into bytes a clock.
DEADLINE=200
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,power.limit --format=csv >> $S
for w in pre qwen; do
  if [ $w = pre ]; then A="--tokens 16384"; else A="--tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu"; fi
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu,temperature.gpu --format=csv,noheader -lms 50 > $OUT/smi-$w.csv &
  SMI=$!
  t run-$w 60 $B/loom_e moe --gpus 1 --impl fused --iters 2000 --warmup 20 --check-tokens 4 $A
  kill $SMI; wait $SMI 2>/dev/null
  # samples while the GPU was busy
  awk -F', ' '$5+0 >= 90 {n++; s+=$2; p+=$4} END {if (n) printf "'$w': %d busy samples, SM clock mean %.0f MHz, power mean %.0f W\n", n, s/n, p/n}' $OUT/smi-$w.csv >> $S
  awk -F', ' '$5+0 >= 90 {print $2+0}' $OUT/smi-$w.csv | sort -n | uniq -c | sort -rn | head -5 | sed "s/^/  $w clock MHz (count value): /" >> $S
done
pack; cat $S
