#!/bin/bash
# session 22, call 2 (2 GPUs): the fence diet (loom) against its parent
# (loom_base = main with the gathered-A output); tests of the new build first
# (collective multi + loopback, faults), test_moe loopback (cfa58ee's
# loom_kernel_end change: run alone this time), then alternating timings.
source scratch/dev_env.sh
B=scratch/bin
G=${G:-2}
( export CUDA_VISIBLE_DEVICES=$((G - 1))
  timeout 250 $B/test_collective loopback > $OUT/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 150 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
CUDA_VISIBLE_DEVICES=0 t moe-loop 150 $B/test_moe loopback
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
    t rs-mk16384-$b-$rep 30 $B/$b gemm-rs $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
    t ar-mk16384-$b-$rep 30 $B/$b gemm-ar $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
    t rs-llama-$b-$rep 40 $B/$b gemm-rs $C --iters 20 --warmup 5 --tokens 16384 --hidden 8192 --ffn 28672
    t ar-llama-$b-$rep 40 $B/$b gemm-ar $C --iters 20 --warmup 5 --tokens 16384 --hidden 8192 --ffn 28672
  done
done
for b in loom_base loom; do
  LOOM_RS_SLICES=1 t ar-floor-s1-$b 20 $B/$b gemm-ar --gpus $G --check-tokens 16 --impl fused --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
  LOOM_RS_SLICES=1 t rs-floor-s1-$b 20 $B/$b gemm-rs --gpus $G --check-tokens 16 --impl fused --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
done
for f in $OUT/*floor*.log $OUT/*mk*.log $OUT/*llama*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
