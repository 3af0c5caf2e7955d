#!/bin/bash
# session 24, call 5 (4 GPUs): 512 tokens (128 rows a source / owner) and
# the all-gather at 1024: the automatic tile (128 x 128 ping-pong, fewer
# wide tiles than SMs) against the 128 x 256 cooperative one forced
# (LOOM_AG_TILE=wide), fused only; 256 tokens on 2 GPUs the same.
source scratch/dev_env.sh
B=scratch/bin
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
for tile in auto wide; do
  env=""; [ $tile != auto ] && env="LOOM_AG_TILE=$tile"
  t ag-g4-t512-$tile 40 env $env $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 128
  t ag-g4-t1024-$tile 40 env $env $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 256
  t rs-g4-t512-$tile 40 env $env $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 512
  t ar-g4-t512-$tile 40 env $env $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 512
  t ag-g2-t256-$tile 40 env $env $B/loom ag-gemm --gpus 2 --impl fused $L --tokens 128
done
t ag-g4-t1024-base 40 $B/loom ag-gemm --gpus 4 --impl baseline $L --tokens 256
for f in $OUT/logs/*-t*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
