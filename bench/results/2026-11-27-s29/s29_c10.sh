#!/bin/bash
# session 29, call 10 (4x H100): the kernel parameter warmed at entry (probe7.diff, not for landing):
# LOOM_PROBE=136 = 8 (stamps) + 128 (threads 0..63 each load one 64-byte line of the 4 KB parameter at
# once, before anything else), against 8 alone, alternating, two rounds.
source scratch/dev_env.sh
B=scratch/bin
export LOOM_PROBE_PERGPU=1
M="--check-tokens 16 --iters 40 --warmup 10"
L="--check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 28672"
for r in 1 2; do
  for p in 8 136; do
    t mkrs4k-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-rs --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
    t mkar4k-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-ar --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
    t rs16-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 16
    t ar16-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 16
    t rsfloor-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-rs --gpus 4 --impl fused --hidden 128 --ffn 256 --tokens 256 --check-tokens 16 --iters 100 --warmup 10
  done
done
for f in $OUT/logs/*-1.log; do echo "== $(basename $f .log)"; grep -E "PROBE gpu 0 stamps|median" $f | grep -v "event median" | sed 's/(us from.*n)://' | sed 's/TFLOP.*phases/phases/'; done >> $S
for f in $OUT/logs/*.log; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/')"; done >> $S
pack; cat $S
