#!/bin/bash
# session 17 call 6 (1 GPU): the expert task raster (LOOM_MOE_RASTER 1 = the old order) on Mixtral-like and other shapes; single/loopback tests
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
L="scratch/bin/loom moe --gpus 1"
MX="--tokens 4096 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10"
t mixtral-r8 60 $L $MX
for r in 1 4 16; do LOOM_MOE_RASTER=$r t mixtral-r$r 40 $L --impl fused $MX; done
for r in 8 1; do
LOOM_MOE_RASTER=$r t grid-r$r 40 $L --impl fused --tokens 4096,16384 --iters 20
LOOM_MOE_RASTER=$r t qwen-r$r 40 $L --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
LOOM_MOE_RASTER=$r t h7168-r$r 40 $L --impl fused --tokens 4096 --experts 32 --topk 2 --hidden 7168 --ffn 2048 --iters 20
LOOM_MOE_RASTER=$r t dsv2-r$r 40 $L --impl fused --tokens 8192 --experts 64 --topk 6 --ffn 1408 --act swiglu --iters 20
done
t mixtral-trace 40 $L --impl fused $MX --iters 3 --trace $OUT/trace_mixtral.json
t moe-single 150 scratch/bin/test_moe single --every 7
t moe-loopback 150 scratch/bin/test_moe loopback --every 7
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ')" >> $S; done
pack
cat $S | grep -v "rc=0 .*|  "
