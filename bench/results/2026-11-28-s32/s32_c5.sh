#!/bin/bash
# session 32, call 5 (4 GPUs): the combine where a thread has at most one vector (decode: a tile's
# column slices) loads its routing slots 8 at once (k = 8: one round trip instead of four), the same
# sums in the same order: the MoE GPU tests on 4 GPUs and in loopback worlds, issue 11's points
# against becc43e (loom_cb), alternating, decode T = 128 traces of both, and the points fused beside
# the baseline.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
t moe-multi 120 $B/test_moe multi --every 7
t faults-multi 60 $B/test_faults multi
t moe-loop 150 $B/test_moe loopback --every 7
t moe-single 150 $B/test_moe single --every 3
for r in 1 2; do for v in loom_cb loom; do
  t dec-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
  t grid-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 4096,8192,16384 --iters 20
  t qwen-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
done; done
for v in loom_cb loom; do
  t tr128-$v 40 $B/$v moe --gpus 4 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr128_$v.json
  python3 bench/trace_stats.py $OUT/tr128_$v.json > $OUT/tr128_$v.txt 2>&1
done
M="$B/loom moe --gpus 4 --impl both"
t both-dec 60 $M --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
t both-grid 60 $M --tokens 4096,8192,16384 --iters 20
t both-qwen 60 $M --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
gzip $OUT/*.json
for f in $OUT/logs/grid-* $OUT/logs/qwen-* $OUT/logs/dec-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
for f in $OUT/logs/both-*.log; do echo "== $(basename $f .log)"; grep -E "^ +[0-9]+ (fused|baseline)" $f; done >> $S
for v in loom_cb loom; do echo "== $v"; grep -E "combine|wait return|GEMM1|when" $OUT/tr128_$v.txt | cut -c1-300; done >> $S
pack; cat $S
