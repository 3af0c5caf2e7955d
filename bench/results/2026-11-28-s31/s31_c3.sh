#!/bin/bash
# session 31, call 3 (4x H100): issue 11's points on today's tree (c279d79; last measured in session 19,
# before sessions 20-30 changed the engine), fused beside the baseline, and traces at T = 16384 and
# decode T = 128.
source scratch/dev_env.sh
B=scratch/bin/loom
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
L="$B moe --gpus 4 --impl both"
t both-grid 60 $L --tokens 4096,8192,16384 --iters 20
t both-dec 60 $L --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
t both-qwen 60 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t tr128 40 $B moe --gpus 4 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr_dec128.json
t tr16k 40 $B moe --gpus 4 --impl fused --tokens 16384 --iters 5 --trace $OUT/tr_16k.json
for f in $OUT/tr_*.json; do python3 bench/trace_stats.py $f > ${f%.json}.txt 2>&1; done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/logs/both-*.log; do echo "== $(basename $f .log)"; grep -E '^ +[0-9]+ (fused|baseline)|phases|bound' $f | cut -c1-200; done >> $S
pack; cat $S
