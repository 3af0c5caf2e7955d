#!/bin/bash
DEADLINE=100
source scratch/dev_env.sh
L="--gpus 2 --check-tokens 16 --iters 100 --warmup 10"
t rs-tiny 20 build/loom_base gemm-rs --tokens 256 --hidden 128 --ffn 256 $L
t ar-tiny 20 build/loom_base gemm-ar --tokens 256 --hidden 128 --ffn 256 $L
t ag-tiny 20 build/loom_base ag-gemm --tokens 128 --hidden 128 --ffn 256 $L
t rs1-tiny 20 build/loom_base gemm-rs --gpus 1 --tokens 256 --hidden 128 --ffn 128 --check-tokens 16 --iters 100 --warmup 10
for f in $OUT/*-tiny.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s %s | ", $1, $2, $3, $4}')"; done >> $S
pack; cat $S
