#!/bin/bash
# session 19 call 7 (x1): ncu SASS warp samples of the MoE kernel (9c8db0d): where gate_tokens' time goes
source scratch/dev_env.sh
DEADLINE=400
for c in "t4096:--tokens 4096" "t128:--tokens 128 --experts 64 --topk 8"; do
  n=${c%%:*}; a=${c#*:}
  t ncu-$n 150 ncu --clock-control none --section SourceCounters --section WarpStateStats --section SchedulerStats --warp-sampling-interval 0 \
     -k regex:moe_kernel --launch-skip 4 --launch-count 1 -o $OUT/$n -f scratch/bin/loom moe --gpus 1 --impl fused --iters 3 --warmup 2 $a
  t csv-$n 100 bash -c "ncu --import $OUT/$n.ncu-rep --page source --csv --print-source sass > $OUT/${n}_sass.csv; ncu --import $OUT/$n.ncu-rep --page details > $OUT/${n}_details.txt; gzip $OUT/${n}_sass.csv"
  rm -f $OUT/$n.ncu-rep
done
pack
cat $S
