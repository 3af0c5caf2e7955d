#!/bin/bash
# session 30, call 5 (4x H100): a probe build (probe_s30.diff, not for landing): per-block stamps of
# the producer's first task (entry, after hop_sched_init, decoded, readiness pointer, past the
# waits, first loads issued) at the decode points and mKernel 4096.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
L="--check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 28672"
M="--check-tokens 16 --iters 40 --warmup 10"
for v in 0 8; do
  export LOOM_PROBE=$v LOOM_PROBE_PERGPU=1
  t rs16-p$v 40 $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 16
  t ar16-p$v 40 $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 16
  t rs128-p$v 40 $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 128
  t mkrs4k-p$v 40 $B/loom gemm-rs --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
done
for f in $OUT/logs/*-p8.log; do echo "== $(basename $f .log)"; grep -E "PROBE gpu [0-9] stamps|fused +median" $f | cut -c1-260; done >> $S
for f in $OUT/logs/*-p0.log; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | cut -c1-200)"; done >> $S
pack; cat $S
