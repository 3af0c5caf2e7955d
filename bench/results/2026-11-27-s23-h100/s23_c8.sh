#!/bin/bash
# session 23, call 8 (4 GPUs): just above the one-group sizes (256, 512
# tokens): a group per owner / source streams B once per group unless the
# groups' tiles of one n-block run together. Reduce-scatter / all-reduce
# with the automatic column chunks against forced ones (LOOM_RS_CHUNKS);
# the all-gather as it is. Fused beside NCCL + cuBLAS.
source scratch/dev_env.sh
B=scratch/bin
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672 --gpus 4"
for tok in 256 512; do
  for ch in auto 64 16; do
    env=""; [ $ch != auto ] && env="LOOM_RS_CHUNKS=$ch"
    C="--impl fused"; [ $ch = auto ] && C="--impl both"
    t rs-t$tok-c$ch 40 env $env $B/loom gemm-rs $C $L --tokens $tok
    t ar-t$tok-c$ch 40 env $env $B/loom gemm-ar $C $L --tokens $tok
  done
  t ag-t$tok 40 $B/loom ag-gemm --impl both $L --tokens $(( tok / 4 ))
done
for f in $OUT/logs/*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
