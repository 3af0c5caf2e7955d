#!/bin/bash
# session 29, call 1 (4x H100): why the decode GEMM phase grows from 1 GPU to 2 and 4.
# Probe build (probe.diff, not for landing): LOOM_PROBE bits in the reduce-scatter kernel:
#   1 done() without its system fence, 2 the side warps idle (the consumers take every item after
#   the engine), 4 the one-tile row table into this rank's own window (no NVLink stores; results
#   wrong, so LOOM_PROBE_NOVERIFY); LOOM_PROBE_PERGPU prints each GPU's phases and event median.
# Same per-GPU GEMM (16 x 7168 x 8192 bf16) at 1 (each GPU alone: the all-gather kernel, a plain
# GEMM, beside cuBLAS), 2 and 4 GPUs.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
export LOOM_PROBE_PERGPU=1
L="--check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --tokens 16"
for d in 0 1 2 3; do t g1-d$d 40 env CUDA_VISIBLE_DEVICES=$d $B/loom gemm-rs --gpus 1 --impl both $L --ffn 7168; done
for r in 1 2; do
  for p in 0 1 2 4 6 7; do
    NV=X=1; [ $p -ge 4 ] && NV=LOOM_PROBE_NOVERIFY=1
    t g2-p$p-$r 40 env LOOM_PROBE=$p $NV $B/loom gemm-rs --gpus 2 --impl fused $L --ffn 14336
  done
  for p in 0 1 4 7; do
    NV=X=1; [ $p -ge 4 ] && NV=LOOM_PROBE_NOVERIFY=1
    t g4-p$p-$r 40 env LOOM_PROBE=$p $NV $B/loom gemm-rs --gpus 4 --impl fused $L --ffn 28672
  done
done
t g2b-both 40 env CUDA_VISIBLE_DEVICES=2,3 $B/loom gemm-rs --gpus 2 --impl both $L --ffn 14336
t g4-both 40 $B/loom gemm-rs --gpus 4 --impl both $L --ffn 28672
for f in $OUT/logs/g*.log; do echo "== $(basename $f .log)"; grep -E "PROBE|median" $f | sed 's/TFLOP.*phases/phases/'; done >> $S
pack; cat $S
