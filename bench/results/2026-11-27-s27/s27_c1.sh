#!/bin/bash
# session 27, call 1 (4 GPUs): the all-gather's bulk pushes counted while the next piece flies
# (LOOM_AG_DEFER): GPU tests (test_collective alternates it), then defer on / off alternating at the
# points whose pushes are bulk copies (the ping-pong tile: mKernel all-gather 4096 / 8192), and the
# piece size under defer at mKernel 4096
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-multi 240 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
M="--check-tokens 16 --iters 40 --warmup 10"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
for r in 1 2; do
  for d in 1 0; do
    E=LOOM_AG_DEFER=$d; I=fused; [ $r$d = 11 ] && I=both
    f mkag4k-d$d-$r $E $B/loom ag-gemm --gpus 4 --impl $I --tokens 1024 --hidden 4096 --ffn 1024 $M
    f mkag8k-d$d-$r $E $B/loom ag-gemm --gpus 4 --impl $I --tokens 2048 --hidden 8192 --ffn 2048 $M
    f ag1k-d$d-$r $E $B/loom ag-gemm --gpus 4 --impl $I --tokens 256 --hidden 8192 --ffn 28672 $M
  done
  for pr in 2 8 16 32; do
    f mkag4k-p$pr-$r LOOM_AG_PIECE_ROWS=$pr $B/loom ag-gemm --gpus 4 --impl fused --tokens 1024 --hidden 4096 --ffn 1024 $M
  done
done
for f in $OUT/logs/mk*-[12].log $OUT/logs/ag*-[12].log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
