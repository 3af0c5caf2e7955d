#!/bin/bash
# session 29, call 2 (4x H100): the decode reduce-scatter's GEMM phase, stamped per block (probe2.diff,
# not for landing). LOOM_PROBE bits: 8 stamps ([1] producer past its first readiness wait, [2] the
# consumers' first full stage, [3] last mainloop end, [4] last epilogue end, [5] consumers out of the
# engine incl. done(), [6] consumers' side work end, [7] kernel end stamp), 16 no credit waits for the
# one-tile group (timing only), 1 done() without its fence, 2 side warps idle, 4 stores local.
source scratch/dev_env.sh
B=scratch/bin
export LOOM_PROBE_PERGPU=1
L="--check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --tokens 16"
for r in 1 2; do
  for p in 8 24 31; do
    NV=X=1; [ $p -ne 8 ] && NV=LOOM_PROBE_NOVERIFY=1
    t g2-p$p-$r 40 env LOOM_PROBE=$p $NV $B/loom gemm-rs --gpus 2 --impl fused $L --ffn 14336
    t g4-p$p-$r 40 env LOOM_PROBE=$p $NV $B/loom gemm-rs --gpus 4 --impl fused $L --ffn 28672
  done
  t g2-ba-$r 40 env LOOM_PROBE=8 LOOM_COLL_B_AHEAD=1 $B/loom gemm-rs --gpus 2 --impl fused $L --ffn 14336
  t ar4-p8-$r 40 env LOOM_PROBE=8 $B/loom gemm-ar --gpus 4 --impl fused $L --ffn 28672
done
for f in $OUT/logs/*.log; do echo "== $(basename $f .log)"; grep -E "PROBE|median" $f | grep -v "event median" | sed 's/TFLOP.*phases/phases/'; done >> $S
pack; cat $S
