#!/bin/bash
# session 24, call 1 (4 GPUs): e5178c0 (the review mend, not yet run on a
# GPU) + the all-gather's column-chunk order (ag_n_chunk): the GPU tests
# (loopback beside them on GPU 3, test_moe single on GPU 2 after the
# multi-GPU tests), then 256 / 512 tokens: the all-gather with chunks
# automatic vs none (LOOM_AG_CHUNKS=1), reduce-scatter / all-reduce as
# they are, and the decode points at 16 / 128 tokens as a check.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
( export CUDA_VISIBLE_DEVICES=3
  timeout 300 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/logs/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 200 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
CUDA_VISIBLE_DEVICES=2 t moe-single 120 $B/test_moe single &
MP=$!
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672 --gpus 4"
CUDA_VISIBLE_DEVICES=0,1 t coll-single 60 $B/test_collective single
wait $MP
for tok in 256 512; do
  t ag-t$tok 40 $B/loom ag-gemm --impl both $L --tokens $(( tok / 4 ))
  t ag-t$tok-c1 40 env LOOM_AG_CHUNKS=1 $B/loom ag-gemm --impl fused $L --tokens $(( tok / 4 ))
  t rs-t$tok 40 $B/loom gemm-rs --impl both $L --tokens $tok
  t ar-t$tok 40 $B/loom gemm-ar --impl both $L --tokens $tok
done
for tok in 16 128; do
  t ag-t$tok 40 $B/loom ag-gemm --impl both $L --tokens $(( tok / 4 ))
  t rs-t$tok 40 $B/loom gemm-rs --impl both $L --tokens $tok
  t ar-t$tok 40 $B/loom gemm-ar --impl both $L --tokens $tok
done
wait $LP; cat $OUT/loop_rc.txt >> $S
for f in $OUT/logs/*-t*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
