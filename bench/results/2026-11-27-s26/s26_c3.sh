#!/bin/bash
# session 26, call 3 (1 GPU): which blocks run the tasks when the tasks are fewer than the SMs
source scratch/dev_env.sh
L="--hidden 8192 --ffn 7168 --tokens 16 --check-tokens 16 --iters 60 --warmup 10"
P="--hidden 1024 --ffn 2048 --tokens 1024 --check-tokens 16 --iters 100 --warmup 10"   # ping-pong, 64 tasks, static order
for r in 1 2; do
  t ag-def-$r 60 build/loom ag-gemm --gpus 1 --impl both $L
  t ag-s1-$r 60 env LOOM_DYN_FIRST=1 build/loom ag-gemm --gpus 1 --impl fused $L
  t ag-s2-$r 60 env LOOM_DYN_FIRST=2 build/loom ag-gemm --gpus 1 --impl fused $L
  t ag-g56-$r 60 env LOOM_COLL_GRID=56 build/loom ag-gemm --gpus 1 --impl fused $L
  t ag-g66-$r 60 env LOOM_COLL_GRID=66 build/loom ag-gemm --gpus 1 --impl fused $L
  t ag-g66s2-$r 60 env LOOM_COLL_GRID=66 LOOM_DYN_FIRST=2 build/loom ag-gemm --gpus 1 --impl fused $L
  t ag-g100-$r 60 env LOOM_COLL_GRID=100 build/loom ag-gemm --gpus 1 --impl fused $L
  t pp-def-$r 60 build/loom gemm-rs --gpus 1 --impl both $P
  t pp-s2-$r 60 env LOOM_DYN_FIRST=2 build/loom gemm-rs --gpus 1 --impl fused $P
  t pp-g64-$r 60 env LOOM_COLL_GRID=64 build/loom gemm-rs --gpus 1 --impl fused $P
done
for f in $OUT/logs/*.log; do echo "$(basename $f .log): $(grep -h 'median' $f | sed 's/TFLOP.*phases end at//' | tr '\n' ' ')"; done >> $S
pack
