#!/bin/bash
source scratch/dev_env.sh
t coll_multi 120 build/tests/test_collective multi
t seq_multi 60 build/tests/test_sequence multi
L="--gpus 2 --check-tokens 16 --iters 30 --warmup 5"
for rep in 1 2; do
for m in 4096 8192; do
  for op in gemm-rs gemm-ar; do
    t $op-$m-base-$rep 40 build/loom_base $op --tokens $m --hidden $((m / 16)) --ffn $m $L
    t $op-$m-new-$rep 40 build/loom $op --tokens $m --hidden $((m / 16)) --ffn $m $L
  done
done
done
t rs-4096-fp32-new 40 build/loom gemm-rs --dtype fp32 --tokens 4096 --hidden 256 --ffn 4096 $L
t rs-4096-fp32-base 40 build/loom_base gemm-rs --dtype fp32 --tokens 4096 --hidden 256 --ffn 4096 $L
for f in $OUT/gemm-*.log $OUT/rs-*.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s | ", $1, $2, $3}')"; done >> $S
t coll_loop 200 build/tests/test_collective loopback
pack; cat $S
