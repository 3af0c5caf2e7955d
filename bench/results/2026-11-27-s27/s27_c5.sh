#!/bin/bash
# session 27, call 5 (2 GPUs: no 4-GPU machine was lent): the reduce-scatter's / all-reduce's slices per tile (rs_slices: the
# floor of 4 only while a slice keeps 16 KB; doubled while the items fit two per block): GPU tests
# (loopback and single on GPU 1 beside the multi-GPU ones), then the new rule against the old floor
# (LOOM_RS_SLICES forced to what the old rule chose) at the points where it changes
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
( export CUDA_VISIBLE_DEVICES=1
  timeout 330 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(grep -c FAIL $OUT/logs/coll-loop.log) FAIL lines | $(tail -1 $OUT/logs/coll-loop.log)" > $OUT/loop_rc.txt
  timeout 120 $B/test_collective single > $OUT/logs/coll-single.log 2>&1; echo "coll-single rc=$? | $(tail -1 $OUT/logs/coll-single.log)" >> $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 240 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
wait $LP; cat $OUT/loop_rc.txt >> $S
M="--check-tokens 16 --iters 40 --warmup 10"
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
for r in 1 2; do
  I=fused; [ $r = 1 ] && I=both
  f mkar8k-new-$r X=1 $B/loom gemm-ar --gpus 2 --impl $I --tokens 8192 --hidden 512 --ffn 8192 $M
  f mkar8k-old-$r LOOM_RS_SLICES=4 $B/loom gemm-ar --gpus 2 --impl fused --tokens 8192 --hidden 512 --ffn 8192 $M
  f ar256-new-$r X=1 $B/loom gemm-ar --gpus 2 --impl $I $L --tokens 256
  f ar256-old-$r LOOM_RS_SLICES=4 $B/loom gemm-ar --gpus 2 --impl fused $L --tokens 256
  f ar128-new-$r X=1 $B/loom gemm-ar --gpus 2 --impl $I $L --tokens 128
  f ar128-old-$r LOOM_RS_SLICES=4 $B/loom gemm-ar --gpus 2 --impl fused $L --tokens 128
  f mkar4k-new-$r X=1 $B/loom gemm-ar --gpus 2 --impl $I --tokens 4096 --hidden 256 --ffn 4096 $M
done
for f in $OUT/logs/*-[12].log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
