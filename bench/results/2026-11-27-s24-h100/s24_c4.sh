#!/bin/bash
# session 24, call 4 (4 GPUs): the one-group form above 128 rows only where
# B is larger than half the L2 (coll_b_past_l2; tests force it with
# LOOM_RS_ONE_TILE=1 / LOOM_AG_ONE_GROUP=1): the GPU tests (loopback beside
# them on GPU 3, still running during the timings below), then the floors
# (now back on a group per owner) and the Llama 256-token points.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
( export CUDA_VISIBLE_DEVICES=3
  timeout 330 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/logs/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 240 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
F="--check-tokens 16 --iters 200 --warmup 20 --hidden 128 --ffn 256 --gpus 4"
t floor-ag-t256 40 $B/loom ag-gemm --impl both $F --tokens 64
t floor-rs-t256 40 $B/loom gemm-rs --impl both $F --tokens 256
t floor-ar-t256 40 $B/loom gemm-ar --impl both $F --tokens 256
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672 --gpus 4"
t ag-g4-t256 40 $B/loom ag-gemm --impl both $L --tokens 64
t rs-g4-t256 40 $B/loom gemm-rs --impl both $L --tokens 256
t ar-g4-t256 40 $B/loom gemm-ar --impl both $L --tokens 256
wait $LP; cat $OUT/loop_rc.txt >> $S
for f in $OUT/logs/*-t*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
