#!/bin/bash
# session 23, call 3 (1 GPU): one-rank communicators without NCCL's window
# (the image's NCCL refused symmetric memory to one rank in calls 1-2); the
# engine at the decode shapes of 2- and 4-GPU tensor parallelism.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-single 120 $B/test_collective single
t moe-single 150 $B/test_moe single
D="--gpus 1 --check-tokens 16 --impl both --iters 50 --warmup 10"
t rs-1gpu-t16 40 $B/loom gemm-rs $D --tokens 16 --hidden 8192 --ffn 7168
t ag-1gpu-t16 40 $B/loom ag-gemm $D --tokens 16 --hidden 8192 --ffn 7168
t moe-1gpu 60 $B/loom moe --gpus 1
t gemm-decode 300 $B/gemm --dtype bf16 --shape decode --variant w1,pp,sk2,sk4 --iters 20
for f in $OUT/logs/*1gpu*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
grep -E "match|engine/cuBLAS" $OUT/logs/gemm-decode.log | sed 's/  */ /g' | cut -c1-150 >> $S
pack; cat $S
