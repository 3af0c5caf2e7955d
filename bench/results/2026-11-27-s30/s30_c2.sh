#!/bin/bash
# session 30, call 2 (4x H100/H200): tests of the tagged partials on 4 GPUs, then the decode points
# with the tagged partials (automatic) against LOOM_LL=0 in the same binary, alternating, two
# rounds, and NCCL + cuBLAS beside them once.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-multi 200 $B/test_collective multi
L="--check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 28672"
F="--check-tokens 16 --iters 100 --warmup 10 --hidden 128 --ffn 256 --tokens 256"
for r in 1 2; do
  for v in ll plain; do
    if [ $v = plain ]; then export LOOM_LL=0; else unset LOOM_LL; fi
    t rs16-$r-$v 40 $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 16
    t ar16-$r-$v 40 $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 16
    t rs1-$r-$v 40 $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 4
    t ar1-$r-$v 40 $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 1
    t rs128-$r-$v 40 $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 128
    t ar128-$r-$v 40 $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 128
    t rsfloor-$r-$v 40 $B/loom gemm-rs --gpus 4 --impl fused $F
    t arfloor-$r-$v 40 $B/loom gemm-ar --gpus 4 --impl fused $F
  done
done
unset LOOM_LL
t rs16-base 60 $B/loom gemm-rs --gpus 4 --impl both $L --tokens 16
t ar16-base 60 $B/loom gemm-ar --gpus 4 --impl both $L --tokens 16
t ar128-base 60 $B/loom gemm-ar --gpus 4 --impl both $L --tokens 128
t rs128-base 60 $B/loom gemm-rs --gpus 4 --impl both $L --tokens 128
t arfloor-base 60 $B/loom gemm-ar --gpus 4 --impl both $F
t rsfloor-base 60 $B/loom gemm-rs --gpus 4 --impl both $F
for f in $OUT/logs/*-[12]-*.log $OUT/logs/*-base.log; do echo "$(basename $f .log): $(grep -E '(fused|baseline) +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | cut -c1-90 | tr '\n' ' ')"; done >> $S
pack; cat $S
