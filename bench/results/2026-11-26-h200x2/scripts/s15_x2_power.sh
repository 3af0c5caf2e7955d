#!/bin/bash
source scratch/dev_env.sh
nvidia-smi -q -d POWER,CLOCK,PERFORMANCE > $OUT/power_q.txt 2>&1
F=index,timestamp,clocks.sm,power.draw.instant,power.draw.average,enforced.power.limit,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader >/dev/null 2>&1 || F=index,timestamp,clocks.sm,power.draw,enforced.power.limit,clocks_throttle_reasons.active
echo "$F" > $OUT/smi_fields.txt
nvidia-smi --query-gpu=$F --format=csv,noheader -lms 50 > $OUT/smi.csv 2>&1 &
SMI=$!
sleep 1
mark() { echo "$1 $(date +%Y/%m/%d\ %H:%M:%S.%N)" >> $OUT/marks.txt; }
R1="build/loom gemm-rs --gpus 1 --tokens 16384 --hidden 8192 --ffn 14336 --check-tokens 4 --iters 300 --warmup 5"
R2="build/loom gemm-rs --gpus 2 --tokens 16384 --hidden 8192 --ffn 28672 --check-tokens 4 --iters 300 --warmup 5"
for impl in fused baseline; do
  mark "1gpu-$impl-start"; t rs1-$impl 60 $R1 --impl $impl; mark "1gpu-$impl-end"; sleep 1
  mark "2gpu-$impl-start"; t rs2-$impl 60 $R2 --impl $impl; mark "2gpu-$impl-end"; sleep 1
done
kill $SMI
for f in $OUT/rs*.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s %s %s | ", $1, $2, $3, $4, $5}')"; done >> $S
cat $OUT/smi_fields.txt >> $S; grep -i "limit\|Power Draw" $OUT/power_q.txt | sort | uniq -c | head -20 >> $S
pack; cat $S
