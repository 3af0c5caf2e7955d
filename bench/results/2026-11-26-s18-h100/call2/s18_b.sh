#!/bin/bash
# session 18 call 2 (1 GPU): the gate's tile split into logits / tail in the trace (GATE_TRACE_SPLIT build of the stream tree)
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
L="scratch/bin/loom_split moe --gpus 1 --impl fused --iters 3"
t tr-e32 40 $L --tokens 16384 --trace $OUT/tr_e32.json
t tr-e8 40 $L --tokens 16384 --experts 8 --trace $OUT/tr_e8.json
t tr-qwen 40 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --trace $OUT/tr_qwen.json
for f in $OUT/tr_*.json; do python3 bench/trace_stats.py $f > ${f%.json}.txt 2>&1; done
gzip $OUT/*.json
pack
cat $S
