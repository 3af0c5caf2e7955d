#!/bin/bash
# session 27, call 2 (4 GPUs): bulk pushes in pieces of up to 256 KB while half the blocks still
# push one (AG_BULK_PIECE_BYTES): the automatic piece against forced ones, defer on / off, at the
# mKernel all-gather 4096 (auto: 32 rows) and 8192 (auto: 16 rows; before: 8)
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
M="--check-tokens 16 --iters 40 --warmup 10"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
for r in 1 2; do
  I=fused; [ $r = 1 ] && I=both
  f mkag4k-auto-$r LOOM_AG_DEFER=1 $B/loom ag-gemm --gpus 4 --impl $I --tokens 1024 --hidden 4096 --ffn 1024 $M
  f mkag4k-p4-$r LOOM_AG_PIECE_ROWS=4 $B/loom ag-gemm --gpus 4 --impl fused --tokens 1024 --hidden 4096 --ffn 1024 $M
  f mkag4k-p16-$r LOOM_AG_PIECE_ROWS=16 $B/loom ag-gemm --gpus 4 --impl fused --tokens 1024 --hidden 4096 --ffn 1024 $M
  f mkag8k-auto-$r LOOM_AG_DEFER=1 $B/loom ag-gemm --gpus 4 --impl $I --tokens 2048 --hidden 8192 --ffn 2048 $M
  f mkag8k-auto-d0-$r LOOM_AG_DEFER=0 $B/loom ag-gemm --gpus 4 --impl fused --tokens 2048 --hidden 8192 --ffn 2048 $M
  f mkag8k-p8-$r LOOM_AG_PIECE_ROWS=8 $B/loom ag-gemm --gpus 4 --impl fused --tokens 2048 --hidden 8192 --ffn 2048 $M
  f mkag8k-p32-$r LOOM_AG_PIECE_ROWS=32 $B/loom ag-gemm --gpus 4 --impl fused --tokens 2048 --hidden 8192 --ffn 2048 $M
  f ag-t128-$r LOOM_AG_DEFER=1 $B/loom ag-gemm --gpus 4 --impl $I --tokens 32 --hidden 8192 --ffn 28672 $M
done
for f in $OUT/logs/*-[12].log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
