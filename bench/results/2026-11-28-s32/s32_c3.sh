#!/bin/bash
# session 32, call 3 (4 GPUs): B ahead of the wait in the MoE producer (moe_b_ahead: a task whose
# input is not there yet sends its weights' first k-blocks into the ring while it waits): the MoE GPU
# tests (test_faults too: the producer's failure path changed) on 4 GPUs and in loopback worlds,
# then issue 11's points against 45add74 (loom_st), alternating, and a decode T = 128 trace of each.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
t moe-multi 120 $B/test_moe multi --every 7
t faults-multi 60 $B/test_faults multi
t moe-loop 150 $B/test_moe loopback --every 7
t faults-loop 90 $B/test_faults loopback
t moe-single 150 $B/test_moe single --every 3
for r in 1 2; do for v in loom_st loom; do
  t grid-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 4096,8192,16384 --iters 20
  t qwen-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
  t dec-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
  t mix-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 512,2048 --experts 8 --hidden 4096 --ffn 14336 --topk 2 --iters 20
done; done
for v in loom_st loom; do
  t tr128-$v 40 $B/$v moe --gpus 4 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr128_$v.json
  python3 bench/trace_stats.py $OUT/tr128_$v.json > $OUT/tr128_$v.txt 2>&1
done
gzip $OUT/*.json
for f in $OUT/logs/grid-* $OUT/logs/qwen-* $OUT/logs/dec-* $OUT/logs/mix-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
for v in loom_st loom; do echo "== $v"; grep -E "GEMM0|GEMM1|combine|when" $OUT/tr128_$v.txt | cut -c1-300; done >> $S
pack; cat $S
