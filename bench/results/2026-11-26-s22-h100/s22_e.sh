#!/bin/bash
# session 22, call 5 (2 GPUs): the reduce-scatter / all-reduce one-tile mode
# (m <= 128: one group over all rows, B read once; loom) against fa0a7df
# (loom_base); tests of the new build first, then alternating timings.
source scratch/dev_env.sh
B=scratch/bin
G=${G:-2}
( export CUDA_VISIBLE_DEVICES=$((G - 1))
  timeout 250 $B/test_collective loopback > $OUT/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 150 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
wait $LP; cat $OUT/loop_rc.txt >> $S
D="--check-tokens 16 --iters 50 --warmup 10 --hidden 8192 --ffn 28672"
for rep in 1 2; do
  for b in loom_base loom; do
    C="--gpus $G --impl fused"; [ $rep = 2 ] && [ $b = loom ] && C="--gpus $G --impl both"
    t rs-dec128-$b-$rep 30 $B/$b gemm-rs $C $D --tokens 128
    t ar-dec128-$b-$rep 30 $B/$b gemm-ar $C $D --tokens 128
    t rs-dec16-$b-$rep 30 $B/$b gemm-rs $C $D --tokens 16
    t ar-dec16-$b-$rep 30 $B/$b gemm-ar $C $D --tokens 16
    t ar-dec1-$b-$rep 30 $B/$b gemm-ar $C $D --tokens 1
    t ar-floor128-$b-$rep 20 $B/$b gemm-ar $C --check-tokens 16 --iters 100 --warmup 10 --tokens 128 --hidden 128 --ffn 256
    t rs-floor-$b-$rep 20 $B/$b gemm-rs $C --check-tokens 16 --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
  done
done
for f in $OUT/*dec*.log $OUT/*floor*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
