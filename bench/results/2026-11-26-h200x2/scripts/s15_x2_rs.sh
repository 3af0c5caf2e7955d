#!/bin/bash
source scratch/dev_env.sh
t coll_multi 120 build/tests/test_collective multi
L="--gpus 2 --check-tokens 16 --iters 30 --warmup 5"
for rep in 1 2; do
for m in 4096 8192 16384; do
  for op in gemm-rs gemm-ar; do
    t $op-$m-base-$rep 40 build/loom_base $op --tokens $m --hidden $((m / 16)) --ffn $m $L
    t $op-$m-new-$rep 40 build/loom $op --tokens $m --hidden $((m / 16)) --ffn $m $L
    t $op-$m-new1-$rep 40 env LOOM_RS_SLICES=1 build/loom $op --tokens $m --hidden $((m / 16)) --ffn $m $L
  done
done
done
t llama-rs-new 60 build/loom gemm-rs --tokens 4096,16384 --hidden 8192 --ffn 28672 $L
t llama-ar-new 60 build/loom gemm-ar --tokens 4096,16384 --hidden 8192 --ffn 28672 $L
t seq_multi 60 build/tests/test_sequence multi
t coll_loop 200 build/tests/test_collective loopback
for f in $OUT/gemm-*.log $OUT/llama*.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s | ", $1, $2, $3}')"; done >> $S
pack; cat $S
