#!/bin/bash
# session 19 call 14 (x1): SiLU on the flush-to-zero SFU ops (ex2.approx.ftz + rcp.approx.ftz, 5 instructions) against 701c2b5
source scratch/dev_env.sh
DEADLINE=330
t moe-single 120 scratch/bin/test_moe single
t moe-loopback 100 scratch/bin/test_moe loopback --every 7
for r in 1 2; do for v in base new; do
  B=scratch/bin/loom; [ $v = base ] && B=scratch/bin/loom_base
  t grid-$v$r 25 $B moe --gpus 1 --impl fused --tokens 4096,16384 --iters 20
  t qwen-$v$r 25 $B moe --gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
  t dec-$v$r 25 $B moe --gpus 1 --impl fused --tokens 1,128 --experts 64 --topk 8 --iters 30
done; done
t tr-new 25 scratch/bin/loom moe --gpus 1 --impl fused --tokens 16384 --iters 5 --trace $OUT/tr_new.json
t tr-relu 25 scratch/bin/loom moe --gpus 1 --impl fused --tokens 16384 --act relu --iters 5 --trace $OUT/tr_relu.json
for f in $OUT/tr_*.json; do python3 bench/trace_stats.py $f > ${f%.json}.txt 2>&1; done
rm -f $OUT/*.json
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ')" >> $S; done
for f in $OUT/tr_*.txt; do echo "$(basename $f): $(grep -E '^  GEMM[01] ' $f | awk '{print $1" "$3}' | tr '\n' ' ')" >> $S; done
pack
cat $S
