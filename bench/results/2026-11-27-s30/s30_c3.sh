#!/bin/bash
# session 30, call 3 (4x H100): the final tree (tagged partials up to 256 KiB of partials a rank):
# test_collective multi, then the decode points fused beside NCCL + cuBLAS, two rounds, and the
# reduce-scatter at 16 tokens on 2 GPUs.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-multi 200 $B/test_collective multi
L="--check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 28672"
F="--check-tokens 16 --iters 100 --warmup 10 --hidden 128 --ffn 256 --tokens 256"
for r in 1 2; do
  t rs16-$r 60 $B/loom gemm-rs --gpus 4 --impl both $L --tokens 16
  t ar16-$r 60 $B/loom gemm-ar --gpus 4 --impl both $L --tokens 16
  t ag16-$r 60 $B/loom ag-gemm --gpus 4 --impl both $L --tokens 16
  t rs4-$r 60 $B/loom gemm-rs --gpus 4 --impl both $L --tokens 4
  t ar1-$r 60 $B/loom gemm-ar --gpus 4 --impl both $L --tokens 1
  t rs128-$r 60 $B/loom gemm-rs --gpus 4 --impl both $L --tokens 128
  t ar128-$r 60 $B/loom gemm-ar --gpus 4 --impl both $L --tokens 128
  t rsfloor-$r 60 $B/loom gemm-rs --gpus 4 --impl both $F
  t arfloor-$r 60 $B/loom gemm-ar --gpus 4 --impl both $F
  t rs16g2-$r 60 $B/loom gemm-rs --gpus 2 --impl both --check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 14336 --tokens 16
done
for f in $OUT/logs/*-[12].log; do echo "$(basename $f .log): $(grep -E '(fused|baseline) +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/;s/.*baseline *median \([0-9.]*\) us.*/base \1/' | cut -c1-90 | tr '\n' ' ')"; done >> $S
pack; cat $S
