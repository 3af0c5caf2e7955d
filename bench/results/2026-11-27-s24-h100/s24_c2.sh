#!/bin/bash
# session 24, call 2 (4 GPUs): one group over several 128-row blocks (the
# all-gather's one-group mode for m dividing 128, the reduce-scatter /
# all-reduce one-tile mode up to 256 rows): the GPU tests (loopback beside
# them on GPU 3), then 256 / 512 tokens on 4 GPUs and 256 on 2 GPUs, new
# against the group per source / owner (LOOM_AG_ONE_GROUP=0,
# LOOM_RS_ONE_TILE=0, same binary), the decode points as a check, and the
# floors of the grid (their shapes now take one group).
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
( export CUDA_VISIBLE_DEVICES=3
  timeout 330 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/logs/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 240 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
for g in 4 2; do
  for tok in 256 512; do
    [ $g = 2 ] && [ $tok = 512 ] && continue
    t ag-g$g-t$tok 40 $B/loom ag-gemm --gpus $g --impl both $L --tokens $(( tok / g ))
    t ag-g$g-t$tok-old 40 env LOOM_AG_ONE_GROUP=0 $B/loom ag-gemm --gpus $g --impl fused $L --tokens $(( tok / g ))
    t rs-g$g-t$tok 40 $B/loom gemm-rs --gpus $g --impl both $L --tokens $tok
    t rs-g$g-t$tok-old 40 env LOOM_RS_ONE_TILE=0 $B/loom gemm-rs --gpus $g --impl fused $L --tokens $tok
    t ar-g$g-t$tok 40 $B/loom gemm-ar --gpus $g --impl both $L --tokens $tok
    t ar-g$g-t$tok-old 40 env LOOM_RS_ONE_TILE=0 $B/loom gemm-ar --gpus $g --impl fused $L --tokens $tok
  done
done
for tok in 16 128; do
  t ag-g4-t$tok 40 $B/loom ag-gemm --gpus 4 --impl both $L --tokens $(( tok / 4 ))
  t rs-g4-t$tok 40 $B/loom gemm-rs --gpus 4 --impl both $L --tokens $tok
  t ar-g4-t$tok 40 $B/loom gemm-ar --gpus 4 --impl both $L --tokens $tok
done
F="--check-tokens 16 --iters 100 --warmup 20 --hidden 128 --ffn 256 --gpus 4"
t floor-ag-t256 40 $B/loom ag-gemm --impl both $F --tokens 64
t floor-rs-t256 40 $B/loom gemm-rs --impl both $F --tokens 256
t floor-ar-t256 40 $B/loom gemm-ar --impl both $F --tokens 256
wait $LP; cat $OUT/loop_rc.txt >> $S
for f in $OUT/logs/*-t*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
