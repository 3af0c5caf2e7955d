#!/bin/bash
# session 22, call 4 (1 GPU): test_moe loopback alone (cfa58ee's
# loom_kernel_end change; calls 1-2 ran it beside other tests and cut it),
# test_moe single; then the decode-sized collective GEMMs' per-GPU shapes
# at world size 1 (one group: B read once), against call 3's 2-GPU phases.
source scratch/dev_env.sh
B=scratch/bin
t moe-loop 330 $B/test_moe loopback
D="--gpus 1 --check-tokens 16 --impl both --iters 50 --warmup 10"
t rs-dec128-1gpu 30 $B/loom gemm-rs $D --tokens 128 --hidden 8192 --ffn 14336
t ag-dec128-1gpu 30 $B/loom ag-gemm $D --tokens 128 --hidden 8192 --ffn 14336
t rs-dec64-1gpu 30 $B/loom gemm-rs $D --tokens 64 --hidden 8192 --ffn 14336
for f in $OUT/*dec*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
