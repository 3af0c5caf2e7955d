#!/bin/bash
# session 27, call 3 (4 GPUs): the deferred count moved to after the next piece's first stores
# (before its ring wraps); GPU tests, then defer on / off at the mKernel all-gather 8192 (auto piece
# 16 rows; p8 + defer off = session 26's pushes) and 4096
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-multi 240 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
M="--check-tokens 16 --iters 40 --warmup 10"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
for r in 1 2; do
  I=fused; [ $r = 1 ] && I=both
  f mkag8k-auto-$r LOOM_AG_DEFER=1 $B/loom ag-gemm --gpus 4 --impl $I --tokens 2048 --hidden 8192 --ffn 2048 $M
  f mkag8k-auto-d0-$r LOOM_AG_DEFER=0 $B/loom ag-gemm --gpus 4 --impl fused --tokens 2048 --hidden 8192 --ffn 2048 $M
  f mkag8k-s26-$r "LOOM_AG_DEFER=0 LOOM_AG_PIECE_ROWS=8" $B/loom ag-gemm --gpus 4 --impl fused --tokens 2048 --hidden 8192 --ffn 2048 $M
  f mkag4k-auto-$r LOOM_AG_DEFER=1 $B/loom ag-gemm --gpus 4 --impl $I --tokens 1024 --hidden 4096 --ffn 1024 $M
  f mkag4k-auto-d0-$r LOOM_AG_DEFER=0 $B/loom ag-gemm --gpus 4 --impl fused --tokens 1024 --hidden 4096 --ffn 1024 $M
  f mkag4k-s26-$r "LOOM_AG_DEFER=0 LOOM_AG_PIECE_ROWS=4" $B/loom ag-gemm --gpus 4 --impl fused --tokens 1024 --hidden 4096 --ffn 1024 $M
done
for f in $OUT/logs/*-[12].log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
