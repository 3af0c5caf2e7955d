#!/bin/bash
# session 20, call 4 (4 GPUs): the final tree: consumers join, last chunk reserved,
# at least 4 slices per tile (rs_slices). Tests (collective, faults,
# sequence), then A/B against
# scratch/bin/loom_base (5b82eb5), alternating; LOOM_RS_SLICES=8 beside.
source scratch/dev_env.sh
B=scratch/bin
( CUDA_VISIBLE_DEVICES=3 timeout 200 $B/test_collective loopback > $OUT/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 150 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
wait $LP; cat $OUT/loop_rc.txt >> $S
for rep in 1 2; do
  for b in loom_base loom; do
    C="--gpus 4 --check-tokens 16 --impl fused"
    [ $rep = 2 ] && [ $b = loom ] && C="--gpus 4 --check-tokens 16 --impl both"
    for m in 4096 8192 16384; do
      t rs-mk$m-$b-$rep 30 $B/$b gemm-rs $C --iters 50 --tokens $m --hidden $((m / 16)) --ffn $m
      t ar-mk$m-$b-$rep 30 $B/$b gemm-ar $C --iters 50 --tokens $m --hidden $((m / 16)) --ffn $m
    done
    t rs-floor-$b-$rep 20 $B/$b gemm-rs $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
    t ar-floor-$b-$rep 20 $B/$b gemm-ar $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
    t rs-llama-$b-$rep 40 $B/$b gemm-rs $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
    t ar-llama-$b-$rep 40 $B/$b gemm-ar $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
  done
done
C="--gpus 4 --check-tokens 16 --impl fused"
LOOM_RS_SLICES=8 t rs-mk16384-s8 30 $B/loom gemm-rs $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
LOOM_RS_SLICES=8 t ar-mk16384-s8 30 $B/loom gemm-ar $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
LOOM_RS_SLICES=2 t ar-mk4096-s2 30 $B/loom gemm-ar $C --iters 50 --tokens 4096 --hidden 256 --ffn 4096
for f in $OUT/r*.log $OUT/a*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at/\1 us |/' | tr '\n' ' ')"; done >> $S
pack; cat $S
