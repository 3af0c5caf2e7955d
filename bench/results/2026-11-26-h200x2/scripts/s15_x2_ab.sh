#!/bin/bash
source scratch/dev_env.sh
t coll_multi 120 build/tests/test_collective multi
L="--gpus 2 --check-tokens 16 --iters 30 --warmup 5"
for rep in 1 2; do
for m in 4096 8192 16384; do
  for op in gemm-rs gemm-ar; do
    t $op-$m-base-$rep 40 build/loom_base $op --tokens $m --hidden $((m / 16)) --ffn $m $L
    t $op-$m-new-$rep 40 build/loom $op --tokens $m --hidden $((m / 16)) --ffn $m $L
  done
done
done
for f in $OUT/gemm-*.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s | ", $1, $2, $3}')"; done >> $S
t moe_ab 300 python3 bench/moe_ab.py $OUT/moe_ab build/loom build/loom_p1 --rounds 3 \
  --case "--gpus 2 --tokens 4096,16384 --iters 20" \
  --case "--gpus 2 --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20" \
  --case "--gpus 2 --tokens 1,128 --experts 64 --topk 8 --iters 30"
cat $OUT/moe_ab/summary.md >> $S 2>/dev/null
pack; cat $S; cat /dev/null
