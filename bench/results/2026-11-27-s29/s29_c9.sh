#!/bin/bash
# session 29, call 9 (4x H100): the producer's first microseconds split further (probe6.diff, not for
# landing; LOOM_PROBE=8): [3] producer entry (after setmaxnreg), [4] first task decoded, [5] its group's
# readiness pointer loaded (the group table in the kernel parameter), [1] past the readiness wait,
# [2] consumers' first full stage.
source scratch/dev_env.sh
B=scratch/bin
export LOOM_PROBE_PERGPU=1 LOOM_PROBE=8
M="--check-tokens 16 --iters 40 --warmup 10"
L="--check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 28672"
t mkrs4k 40 $B/loom gemm-rs --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
t rs16 40 $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 16
t rsfloor 40 $B/loom gemm-rs --gpus 4 --impl fused --hidden 128 --ffn 256 --tokens 256 --check-tokens 16 --iters 100 --warmup 10
for f in $OUT/logs/*.log; do echo "== $(basename $f .log)"; grep -E "PROBE gpu . stamps|median" $f | grep -v "event median" | sed 's/(us from.*n)://' | sed 's/TFLOP.*phases/phases/'; done >> $S
pack; cat $S
