#!/bin/bash
# session 20, call 3 (4 GPUs): side-role slices with the consumers joining
# (LOOM_RS_SLICES 1 / 2 / 4 on the same binary); the all-gather GEMM's
# per-GPU GEMM alone on one GPU (bf16, fp32) against the 4-GPU run.
source scratch/dev_env.sh
B=scratch/bin
C="--gpus 4 --check-tokens 16 --impl fused"
for rep in 1 2; do
for s in 1 2 4; do
  LOOM_RS_SLICES=$s t rs-mk16384-s$s-$rep 30 $B/loom gemm-rs $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
  LOOM_RS_SLICES=$s t ar-mk16384-s$s-$rep 30 $B/loom gemm-ar $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
  [ $rep = 1 ] && LOOM_RS_SLICES=$s t ar-mk8192-s$s-$rep 30 $B/loom gemm-ar $C --iters 50 --tokens 8192 --hidden 512 --ffn 8192
  [ $rep = 1 ] && LOOM_RS_SLICES=$s t rs-llama-s$s-$rep 40 $B/loom gemm-rs $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
  [ $rep = 1 ] && LOOM_RS_SLICES=$s t ar-llama-s$s-$rep 40 $B/loom gemm-ar $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
done
done
t ag1-bf16 40 $B/loom ag-gemm --gpus 1 --check-tokens 16 --iters 20 --warmup 5 --tokens 4096 --hidden 8192 --ffn 7168 --impl both
t ag4-bf16 40 $B/loom ag-gemm --gpus 4 --check-tokens 16 --iters 20 --warmup 5 --tokens 4096 --hidden 8192 --ffn 28672 --impl fused
t ag1-bf16-n3584 40 $B/loom ag-gemm --gpus 1 --check-tokens 16 --iters 20 --warmup 5 --tokens 4096 --hidden 8192 --ffn 3584 --impl both
for f in $OUT/r*.log $OUT/a*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at/\1 us |/' | tr '\n' ' ')"; done >> $S
pack; cat $S
