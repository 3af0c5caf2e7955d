#!/bin/bash
# session 19 call 1 (x1): current tree (3182ec3) decode and small-T traces at world size 1
source scratch/dev_env.sh
DEADLINE=170
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
L="scratch/bin/loom moe --gpus 1 --impl fused"
for T in 1 128 512; do
  t dec$T 25 $L --tokens $T --experts 64 --topk 8 --iters 20 --trace $OUT/tr_dec$T.json
done
t e32_4096 25 $L --tokens 4096 --iters 10 --trace $OUT/tr_4096.json
t both 40 scratch/bin/loom moe --gpus 1 --impl both --tokens 1,16,128,512 --experts 64 --topk 8 --iters 30
for f in $OUT/tr_*.json; do python3 bench/trace_stats.py $f > ${f%.json}.txt 2>&1; done
gzip $OUT/*.json 2>/dev/null
pack
cat $S
