#!/bin/bash
# session 16, call 6 (4 GPUs): the reduce-scatter / all-reduce tile signal
# deferred by one mainloop (hop_side_defer). Tests, then A/B against
# build/loom_base (b9cff0e), alternating.
source scratch/dev_env.sh
( CUDA_VISIBLE_DEVICES=3 timeout 200 ./build/tests/test_collective loopback > $OUT/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 150 ./build/tests/test_collective multi
t seq-multi 60 ./build/tests/test_sequence multi
t faults-multi 60 ./build/tests/test_faults multi
wait $LP; cat $OUT/loop_rc.txt >> $S
C="--gpus 4 --check-tokens 16 --impl fused"
for rep in 1 2; do
  for b in loom_base loom; do
    t rs-mk16-$b-$rep 30 build/$b gemm-rs $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
    t ar-mk16-$b-$rep 30 build/$b gemm-ar $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
    t rs-mk8-$b-$rep 30 build/$b gemm-rs $C --iters 50 --tokens 8192 --hidden 512 --ffn 8192
    t rs-llama-$b-$rep 40 build/$b gemm-rs $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
  done
done
t ar-llama-new 40 build/loom gemm-ar --gpus 4 --check-tokens 16 --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
t rs-mk16-both 30 build/loom gemm-rs --gpus 4 --check-tokens 16 --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
for f in $OUT/r*.log $OUT/a*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at/\1 us |/' | tr '\n' ' ')"; done >> $S
pack; cat $S
