#!/bin/bash
# session 22, call A (2 GPUs): cfa58ee + the gathered-A output (a_gathered.diff):
# every GPU test that touches the collective kernels and the MoE kernel; then
# the launch probe and the floors (1 and 2 GPUs) with their phase stamps.
source scratch/dev_env.sh
B=scratch/bin
( export CUDA_VISIBLE_DEVICES=1
  timeout 260 $B/test_collective loopback > $OUT/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/coll-loop.log)" > $OUT/loop_rc.txt
  timeout 90 $B/test_moe loopback > $OUT/moe-loop.log 2>&1; echo "moe-loop rc=$? | $(tail -1 $OUT/moe-loop.log)" >> $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 150 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
t moe-multi 90 $B/test_moe multi
CUDA_VISIBLE_DEVICES=0 t moe-single 90 $B/test_moe single
CUDA_VISIBLE_DEVICES=0 t coll-single 60 $B/test_collective single
wait $LP; cat $OUT/loop_rc.txt >> $S
CUDA_VISIBLE_DEVICES=0 t probe-launch 60 $B/probe_launch
F="--check-tokens 16 --iters 100 --warmup 10 --impl both"
for g in 1 2; do
  t ag-floor-$g 30 $B/loom ag-gemm --gpus $g $F --tokens $((256 / g)) --hidden 128 --ffn 256
  t rs-floor-$g 30 $B/loom gemm-rs --gpus $g $F --tokens 256 --hidden 128 --ffn 256
  t ar-floor-$g 30 $B/loom gemm-ar --gpus $g $F --tokens 256 --hidden 128 --ffn 256
done
t rs-mk4096 30 $B/loom gemm-rs --gpus 2 --check-tokens 16 --impl both --iters 50 --tokens 4096 --hidden 256 --ffn 4096
t ar-mk4096 30 $B/loom gemm-ar --gpus 2 --check-tokens 16 --impl both --iters 50 --tokens 4096 --hidden 256 --ffn 4096
for f in $OUT/*floor*.log $OUT/*mk*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
cat $OUT/probe-launch.log >> $S
pack; cat $S
