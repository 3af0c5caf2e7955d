#!/bin/bash
# session 19 call 9 (x4): final tree (a9ffa77 = 9c8db0d's device code) records (fp32, weak scaling, shapes no issue
# names, trace); and variant v (top-k: ballot + shuffle for the index when one lane holds the top key) A/B + its tests
source scratch/dev_env.sh
DEADLINE=470
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
t v-moe-loopback 60 scratch/bin/test_moe_v loopback --every 7
D="--tokens 1,16,128,512 --experts 64 --topk 8 --iters 50"
for r in 1 2; do
  t dec-new$r 30 scratch/bin/loom moe --gpus $N --impl fused $D
  t dec-v$r 30 scratch/bin/loom_v moe --gpus $N --impl fused $D
done
t qwen-new 30 scratch/bin/loom moe --gpus $N --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t qwen-v 30 scratch/bin/loom_v moe --gpus $N --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t grid-new 30 scratch/bin/loom moe --gpus $N --impl fused --tokens 4096,16384 --iters 20
t grid-v 30 scratch/bin/loom_v moe --gpus $N --impl fused --tokens 4096,16384 --iters 20
L="scratch/bin/loom moe --gpus $N --impl both"
t fp32 40 $L --tokens 16384 --dtype fp32 --iters 10
t weak2 25 scratch/bin/loom moe --gpus 2 --impl fused --tokens 8192 --iters 20
t weak4 25 scratch/bin/loom moe --gpus $N --impl fused --tokens 8192 --iters 20
t mixtral 60 $L --tokens 4096 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10
t mixtral-dec 60 $L --tokens 1,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20
t dsv3 90 $L --tokens 4096 --experts 256 --topk 8 --hidden 7168 --ffn 2048 --iters 5
t trace 30 scratch/bin/loom moe --gpus $N --impl fused --tokens 16384 --iters 5 --trace $OUT/trace16k.json
for f in $OUT/trace*.json; do python3 bench/trace_stats.py $f > ${f%.json}.txt 2>&1; done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3" "$10}' | tr '\n' ' ') | $(grep -o 'gate [0-9]*' $f | tr '\n' ' ')" >> $S; done
pack
cat $S
