#!/bin/bash
# session 22, call 3 (2 GPUs): the cooperative 128 x 128 tile for launches of
# fewer 128 x 128 tiles than SMs (loom) against the fence diet (loom_base =
# fa0a7df); tests of the new build first, then alternating timings, then
# decode-sized Llama points (128 tokens) beside the baseline.
source scratch/dev_env.sh
B=scratch/bin
G=${G:-2}
( export CUDA_VISIBLE_DEVICES=$((G - 1))
  timeout 250 $B/test_collective loopback > $OUT/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 150 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
wait $LP; cat $OUT/loop_rc.txt >> $S
for rep in 1 2; do
  for b in loom_base loom; do
    C="--gpus $G --check-tokens 16 --impl fused"; [ $rep = 2 ] && [ $b = loom ] && C="--gpus $G --check-tokens 16 --impl both"
    for op in ag-gemm gemm-rs gemm-ar; do
      T=256; [ $op = ag-gemm ] && T=$((256 / G))
      t $op-floor-$b-$rep 20 $B/$b $op $C --iters 100 --warmup 10 --tokens $T --hidden 128 --ffn 256
    done
    t ag-mk4096-$b-$rep 30 $B/$b ag-gemm $C --iters 50 --tokens $((4096 / G)) --hidden 4096 --ffn $((G * 256))
    t rs-mk4096-$b-$rep 30 $B/$b gemm-rs $C --iters 50 --tokens 4096 --hidden 256 --ffn 4096
    t ar-mk4096-$b-$rep 30 $B/$b gemm-ar $C --iters 50 --tokens 4096 --hidden 256 --ffn 4096
    t ag-mk8192-$b-$rep 30 $B/$b ag-gemm $C --iters 50 --tokens $((8192 / G)) --hidden 8192 --ffn $((G * 512))
    t rs-mk8192-$b-$rep 30 $B/$b gemm-rs $C --iters 50 --tokens 8192 --hidden 512 --ffn 8192
    t ar-mk8192-$b-$rep 30 $B/$b gemm-ar $C --iters 50 --tokens 8192 --hidden 512 --ffn 8192
  done
done
D="--gpus $G --check-tokens 16 --impl both --iters 50 --warmup 10"
t ag-dec128 30 $B/loom ag-gemm $D --tokens $((128 / G)) --hidden 8192 --ffn 28672
t rs-dec128 30 $B/loom gemm-rs $D --tokens 128 --hidden 8192 --ffn 28672
t ar-dec128 30 $B/loom gemm-ar $D --tokens 128 --hidden 8192 --ffn 28672
t ar-dec16 30 $B/loom gemm-ar $D --tokens 16 --hidden 8192 --ffn 28672
for f in $OUT/*floor*.log $OUT/*mk*.log $OUT/*dec*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
