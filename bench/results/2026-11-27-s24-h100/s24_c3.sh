#!/bin/bash
# session 24, call 3 (4 GPUs): the all-gather's one group only for sources
# of fewer than 128 rows; LOOM_AG_PIECE_ROWS (the pushes' piece size, a
# diagnostic). GPU tests (loopback beside them on GPU 3; 2-GPU piece sweep
# on GPUs 0, 1 meanwhile), then, alone on the machine: the all-gather at
# 128 rows a source (512 tokens on 4 GPUs) by piece size, the floors with
# and without the one-tile mode, the 256 / 512-token points, the grid.
source scratch/dev_env.sh
B=scratch/bin
mkdir -p build && cp $B/loom build/loom
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
( export CUDA_VISIBLE_DEVICES=3
  timeout 330 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/logs/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 240 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
for pr in auto 2 4 8 32; do
  env=""; [ $pr != auto ] && env="LOOM_AG_PIECE_ROWS=$pr"
  CUDA_VISIBLE_DEVICES=0,1 t ag-g2-t256-p$pr 40 env $env $B/loom ag-gemm --gpus 2 --impl fused $L --tokens 128
done
wait $LP; cat $OUT/loop_rc.txt >> $S
for pr in auto 2 4 8 32; do
  env=""; [ $pr != auto ] && env="LOOM_AG_PIECE_ROWS=$pr"
  t ag-g4-t512-p$pr 40 env $env $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 128
done
F="--check-tokens 16 --iters 200 --warmup 20 --hidden 128 --ffn 256 --gpus 4"
for rep in 1 2; do
  t floor-rs-t256-r$rep 40 $B/loom gemm-rs --impl both $F --tokens 256
  t floor-rs-t256-old-r$rep 40 env LOOM_RS_ONE_TILE=0 $B/loom gemm-rs --impl fused $F --tokens 256
  t floor-ar-t256-r$rep 40 $B/loom gemm-ar --impl both $F --tokens 256
  t floor-ar-t256-old-r$rep 40 env LOOM_RS_ONE_TILE=0 $B/loom gemm-ar --impl fused $F --tokens 256
done
for tok in 256 512; do
  t ag-g4-t$tok 40 $B/loom ag-gemm --gpus 4 --impl both $L --tokens $(( tok / 4 ))
  t rs-g4-t$tok 40 $B/loom gemm-rs --gpus 4 --impl both $L --tokens $tok
  t ar-g4-t$tok 40 $B/loom gemm-ar --gpus 4 --impl both $L --tokens $tok
done
for f in $OUT/logs/*-t*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
bash bench/collective_grid.sh $OUT/grid 4 > $OUT/grid.log 2>&1; echo "grid rc=$?" >> $S
grep -E "^== |fused +median|baseline +median|FAILED|collective-grid" $OUT/grid.log | sed 's/ TFLOP.*phases end at/ | /' | cut -c1-160 >> $S
(cd $OUT && tar czf grid.tgz grid grid.log && rm -rf grid); pack; cat $S
