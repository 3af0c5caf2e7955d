#!/bin/bash
# session 17 call 8 (x2): shapes no issue names, fused vs baseline (a77cf7f device code)
source scratch/dev_env.sh
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
L="scratch/bin/loom moe --gpus $N --check-tokens 16"
t mixtral-dec 60 $L --tokens 1,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20
t dsv3-4096 60 $L --tokens 4096 --experts 256 --topk 8 --hidden 7168 --ffn 2048 --act swiglu --iters 10
t dsv3-dec 60 $L --tokens 1,128 --experts 256 --topk 8 --hidden 7168 --ffn 2048 --act swiglu --iters 20
t q235-8192 60 $L --tokens 8192 --experts 128 --topk 8 --hidden 4096 --ffn 1536 --act swiglu --iters 10
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3" "$9}' | tr '\n' ' ')" >> $S; done
pack
cat $S
