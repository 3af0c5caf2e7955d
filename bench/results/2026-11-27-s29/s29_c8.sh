#!/bin/bash
# session 29, call 8 (4x H100): the launch's first microseconds, stamped (probe5.diff, not for landing):
# LOOM_PROBE=8: [3] engine entry, [4] past the ring setup's __syncthreads, [5] producer before its first
# readiness wait, [1] after it, [2] consumers' first full stage, [6] side work end, [7] kernel end stamp;
# 72 = 8 + 64: the groups' tensor maps (kernel parameter) prefetched at entry (the engine prefetches
# only the plain engine's two maps today).
source scratch/dev_env.sh
B=scratch/bin
export LOOM_PROBE_PERGPU=1
M="--check-tokens 16 --iters 40 --warmup 10"
L="--check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 28672"
for r in 1 2; do
  for p in 8 72; do
    t mkrs4k-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-rs --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
    t mkar4k-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-ar --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
    t rs16-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 16
    t ar16-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 16
    t rsfloor-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-rs --gpus 4 --impl fused --hidden 128 --ffn 256 --tokens 256 --check-tokens 16 --iters 100 --warmup 10
  done
done
for f in $OUT/logs/*-1.log; do echo "== $(basename $f .log)"; grep -E "PROBE gpu 0 stamps|median" $f | grep -v "event median" | sed 's/(us from.*n)://' | sed 's/TFLOP.*phases/phases/'; done >> $S
for f in $OUT/logs/*-2.log; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/')"; done >> $S
pack; cat $S
