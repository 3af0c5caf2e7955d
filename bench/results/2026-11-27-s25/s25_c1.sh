#!/bin/bash
# session 25, call 1 (1 GPU): the bias (loom_gemm_args_t.bias; every other
# test_collective case has one) in test_collective single (R = 1) and
# loopback (R = 2, 4, 8 on one GPU); `loom ag-gemm / gemm-rs / gemm-ar
# --bias 1` at R = 1 (the CLI's reference adds it); then the engine alone
# at the collectives' 256-1024-row shapes (bench/gemm --shape mid).
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-single 150 $B/test_collective single
timeout 330 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(grep -c FAIL $OUT/logs/coll-loop.log) FAIL lines | $(tail -1 $OUT/logs/coll-loop.log)" >> $S
L="--check-tokens 16 --iters 20 --warmup 5 --hidden 8192 --ffn 7168 --gpus 1"
for bias in 0 1; do
  t ag-bias$bias 60 $B/loom ag-gemm --impl both $L --tokens 512 --bias $bias --act gelu
  t rs-bias$bias 60 $B/loom gemm-rs --impl both $L --tokens 512 --bias $bias
  t ar-bias$bias 60 $B/loom gemm-ar --impl both $L --tokens 512 --bias $bias --act silu
done
t gemm-mid 200 $B/gemm --shape mid --dtype bf16 --iters 20
pack; cat $S
