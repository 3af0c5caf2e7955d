#!/bin/bash
# session 23, call 2 (4 GPUs): the decode tile (64 x 128 for groups of <= 64
# rows: reduce-scatter, all-reduce, all-gather) and the all-gather's
# one-group mode (R m <= 128): the GPU tests, then decode-sized Llama-70B TP
# points, new (automatic) against the previous choice (LOOM_AG_TILE=narrow
# LOOM_AG_ONE_GROUP=0: the 128 x 128 tile, a group per source), alternating.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
( export CUDA_VISIBLE_DEVICES=3
  timeout 300 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/logs/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 200 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
CUDA_VISIBLE_DEVICES=0,1,2 t moe-multi 120 $B/test_moe multi
wait $LP; cat $OUT/loop_rc.txt >> $S
L="--check-tokens 16 --iters 50 --warmup 10 --hidden 8192 --ffn 28672"
dec() { # gpus reps tokens...
  local g=$1 reps=$2; shift 2
  for rep in $(seq 1 $reps); do
    for tok in "$@"; do
      for mode in old new; do
        local env="LOOM_AG_TILE=narrow LOOM_AG_ONE_GROUP=0"; [ $mode = new ] && env=""
        local C="--gpus $g --impl fused"; [ $rep = 1 ] && [ $mode = new ] && C="--gpus $g --impl both"
        t ag-g$g-t$tok-$mode-$rep 40 env $env $B/loom ag-gemm $C $L --tokens $(( (tok + g - 1) / g ))
        t rs-g$g-t$tok-$mode-$rep 40 env $env $B/loom gemm-rs $C $L --tokens $tok
        t ar-g$g-t$tok-$mode-$rep 40 env $env $B/loom gemm-ar $C $L --tokens $tok
      done
    done
  done
}
dec 4 2 4 16 64 128
dec 2 1 2 16 128
for f in $OUT/logs/*-g*-t*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
