#!/bin/bash
# session 23, call 4 (4 GPUs): the tree with the decode tile, the all-gather's
# one-group mode, slices on an owner's rows and one-rank communicators
# without NCCL's window: the GPU tests (multi R = 1, 2, 4; loopback beside
# them on GPU 3), then the decode points (fused beside NCCL + cuBLAS).
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
( export CUDA_VISIBLE_DEVICES=3
  timeout 280 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/logs/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 200 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
wait $LP; cat $OUT/loop_rc.txt >> $S
L="--check-tokens 16 --iters 50 --warmup 10 --hidden 8192 --ffn 28672"
for g in 4 2; do
  for tok in 1 16 64 128; do
    [ $tok = 1 ] && tok=$g
    t ag-g$g-t$tok 40 $B/loom ag-gemm --gpus $g --impl both $L --tokens $(( tok / g ))
    t rs-g$g-t$tok 40 $B/loom gemm-rs --gpus $g --impl both $L --tokens $tok
    t ar-g$g-t$tok 40 $B/loom gemm-ar --gpus $g --impl both $L --tokens $tok
  done
done
for f in $OUT/logs/*-g*-t*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
