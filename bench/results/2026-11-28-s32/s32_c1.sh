#!/bin/bash
# session 32, call 1 (4 GPUs): GEMM1's return in 128-byte row segments (moe_hop_store_ret16,
# bench/results/2026-11-28-s31/ret16_segments.diff): the MoE GPU tests on 4 GPUs and in loopback
# worlds, then issue 11's points against b6880c8 (loom_base), alternating, and a T = 16384 trace.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
t moe-multi 120 $B/test_moe multi --every 7
t faults-multi 60 $B/test_faults multi
t moe-loop 150 $B/test_moe loopback --every 7
t moe-single 150 $B/test_moe single --every 3
for r in 1 2; do for v in loom_base loom; do
  t grid-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 4096,8192,16384 --iters 20
  t qwen-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
  t dec-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
done; done
t both-grid 60 $B/loom moe --gpus 4 --impl both --tokens 4096,8192,16384 --iters 20
t tr16k 40 $B/loom moe --gpus 4 --impl fused --tokens 16384 --iters 5 --trace $OUT/tr16k.json
python3 bench/trace_stats.py $OUT/tr16k.json > $OUT/tr16k.txt 2>&1; gzip $OUT/*.json
for f in $OUT/logs/grid-* $OUT/logs/qwen-* $OUT/logs/dec-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
grep -E "^ +[0-9]+ (fused|baseline)" $OUT/logs/both-grid.log >> $S
grep -E "GEMM0|GEMM1|combine|when|busy" $OUT/tr16k.txt | cut -c1-300 >> $S
pack; cat $S
