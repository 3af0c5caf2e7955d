#!/bin/bash
# session 32, call 6 (4 GPUs, the session's last device time): the combine's two sum paths as one
# template (combine_vectors<DT, U, JB>), no change meant: the consumers' SASS region is identical to
# 63a088b's, the combine's differs in registers and order. The MoE GPU tests, then one round of
# issue 11's points against 63a088b (loom_63a).
source scratch/dev_env.sh
DEADLINE=${DEADLINE:-225}
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
t moe-multi 60 $B/test_moe multi --every 7
t moe-loop 50 $B/test_moe loopback --every 7
t moe-single 60 $B/test_moe single --every 3
t faults-multi 30 $B/test_faults multi
for v in loom_63a loom; do
  t dec-$v 20 $B/$v moe --gpus 4 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
  t grid-$v 20 $B/$v moe --gpus 4 --impl fused --tokens 4096,16384 --iters 20
done
for f in $OUT/logs/grid-* $OUT/logs/dec-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
