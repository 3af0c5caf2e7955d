#!/bin/bash
# session 21, call 4 (4 GPUs): the tree (loom) = b9a2118 + the reduce-scatter /
# all-reduce on the dynamic task order + bulk pushes for the all-gather's
# ping-pong tile, against b9a2118 (loom_dyn), alternating; tests first.
source scratch/dev_env.sh
G=${G:-4}
B=scratch/bin
( CUDA_VISIBLE_DEVICES=$((G - 1)) timeout 230 $B/test_collective loopback > $OUT/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 150 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
wait $LP; cat $OUT/loop_rc.txt >> $S
L="--check-tokens 16 --iters 20 --warmup 5"
for rep in 1 2; do
  for b in loom_dyn loom; do
    C="--gpus $G --check-tokens 16 --impl fused"; [ $rep = 2 ] && [ $b = loom ] && C="--gpus $G --check-tokens 16 --impl both"
    t rs-llama-$b-$rep 40 $B/$b gemm-rs $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
    t ar-llama-$b-$rep 40 $B/$b gemm-ar $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
    t rs-mk16384-$b-$rep 30 $B/$b gemm-rs $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
    t ar-mk16384-$b-$rep 30 $B/$b gemm-ar $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
    t ag-mk4096-$b-$rep 30 $B/$b ag-gemm $C $L --tokens 1024 --hidden 4096 --ffn 1024
    t ag-mk8192-$b-$rep 30 $B/$b ag-gemm $C $L --tokens 2048 --hidden 8192 --ffn 2048
    if [ $rep = 1 ] || [ $b = loom ]; then
      t rs-mk4096-$b-$rep 30 $B/$b gemm-rs $C --iters 50 --tokens 4096 --hidden 256 --ffn 4096
      t ar-mk4096-$b-$rep 30 $B/$b gemm-ar $C --iters 50 --tokens 4096 --hidden 256 --ffn 4096
      t rs-mk8192-$b-$rep 30 $B/$b gemm-rs $C --iters 50 --tokens 8192 --hidden 512 --ffn 8192
      t ar-mk8192-$b-$rep 30 $B/$b gemm-ar $C --iters 50 --tokens 8192 --hidden 512 --ffn 8192
      t ag-llama-$b-$rep 40 $B/$b ag-gemm $C $L --tokens 1024,4096 --hidden 8192 --ffn 28672
      t rs-floor-$b-$rep 20 $B/$b gemm-rs $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
      t ar-floor-$b-$rep 20 $B/$b gemm-ar $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
    fi
  done
done
for f in $OUT/ag*.log $OUT/rs*.log $OUT/ar*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
