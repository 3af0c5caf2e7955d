#!/bin/bash
# session 29, call 7 (4x H100): per-block stamps (probe3.diff, LOOM_PROBE=8; not for landing) of the
# mid-size points that lose to NCCL + cuBLAS: mKernel reduce-scatter / all-reduce M = K = 4096, N = 256
# (tasks of one wave, the partials all pushed at its end), and the all-reduce at 128 tokens.
source scratch/dev_env.sh
B=scratch/bin
export LOOM_PROBE_PERGPU=1 LOOM_PROBE=8
M="--check-tokens 16 --iters 40 --warmup 10"
for r in 1 2; do
  t mkrs4k-$r 40 $B/loom gemm-rs --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
  t mkar4k-$r 40 $B/loom gemm-ar --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
  t ar128-$r 40 $B/loom gemm-ar --gpus 4 --impl fused --tokens 128 --hidden 8192 --ffn 28672 $M
done
t mkrs4k-both 40 $B/loom gemm-rs --gpus 4 --impl both --tokens 4096 --hidden 256 --ffn 4096 $M
t mkar4k-both 40 $B/loom gemm-ar --gpus 4 --impl both --tokens 4096 --hidden 256 --ffn 4096 $M
for f in $OUT/logs/*.log; do echo "== $(basename $f .log)"; grep -E "PROBE gpu . stamps|median" $f | grep -v "event median" | sed 's/(us from.*n)://' | sed 's/TFLOP.*phases/phases/'; done >> $S
pack; cat $S
