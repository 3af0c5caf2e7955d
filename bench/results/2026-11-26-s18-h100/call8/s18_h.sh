#!/bin/bash
# session 18 call 8 (x4): LOOM_MOE_LOCAL_FIRST 0 (off) / 1 (rotation + dispatch order + own expert-0 rows as the only foreground share) / 2 (rotation + order, foreground = every destination's expert-0 rows), same binary
source scratch/dev_env.sh
DEADLINE=300
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
L="scratch/bin/loom moe --gpus $N --impl fused"
for r in 1 2; do
for v in 0 1 2; do
LOOM_MOE_LOCAL_FIRST=$v t grid-lf$v-$r 40 $L --tokens 2048,4096,8192,16384 --iters 20
LOOM_MOE_LOCAL_FIRST=$v t dec-lf$v-$r 30 $L --tokens 128,512,1024 --experts 64 --topk 8 --iters 50
done; done
LOOM_MOE_LOCAL_FIRST=2 t moe-multi 90 scratch/bin/test_moe multi --every 7
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$3}' | tr '\n' ' ')" >> $S; done
pack
cat $S
