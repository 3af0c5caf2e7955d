#!/bin/bash
# session 18 call 4 (1 GPU): gate tile split into logits / tail (trace kind "wait header" = the tail): v1 (stream, 16-expert passes, one token a warp) vs v2 (32-expert passes, tree sum, batched top-k)
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
for v in v1s v2s; do
L="scratch/bin/loom_$v moe --gpus 1 --impl fused --iters 3"
t $v-e32 40 $L --tokens 16384 --trace $OUT/tr_${v}_e32.json
t $v-qwen 40 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --trace $OUT/tr_${v}_qwen.json
t $v-dec1 40 $L --tokens 1 --experts 64 --topk 8 --trace $OUT/tr_${v}_dec1.json
t $v-dec128 40 $L --tokens 128 --experts 64 --topk 8 --trace $OUT/tr_${v}_dec128.json
done
for f in $OUT/tr_*.json; do echo "== $(basename $f)" >> $S; python3 bench/trace_stats.py $f 2>&1 | grep -E "^  (gate|wait header) " >> $S; done
gzip $OUT/*.json
pack
cat $S
