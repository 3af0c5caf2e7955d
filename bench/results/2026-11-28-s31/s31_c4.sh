#!/bin/bash
# session 31, call 4 (1 GPU): the gate's cooperative finish at small T (each pass's block ranks a
# share of the tile's tokens): MoE tests on one GPU and its loopback worlds, then decode and E = 32
# points against c279d79 (loom_base), alternating, with the gate's phase end.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t moe-loop 240 $B/test_moe loopback --every 7
t moe-single 150 $B/test_moe single
t faults-loop 120 $B/test_faults loopback
t seq-loop 120 $B/test_sequence loopback --calls 3
for r in 1 2; do for v in loom_base loom; do
  t dec-$v-$r 60 $B/$v moe --gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
  t e32-$v-$r 60 $B/$v moe --gpus 1 --impl fused --tokens 128,1024,4096 --iters 20
  t qwen-$v-$r 60 $B/$v moe --gpus 1 --impl fused --tokens 128,1024 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
done; done
t tr128 40 $B/loom moe --gpus 1 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr_dec128.json
gzip $OUT/*.json 2>/dev/null
for f in $OUT/logs/dec-* $OUT/logs/e32-* $OUT/logs/qwen-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*gate \([0-9]*\),.*/\1 (gate \2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
