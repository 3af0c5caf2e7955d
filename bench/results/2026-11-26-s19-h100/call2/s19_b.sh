#!/bin/bash
# session 19 call 2 (x1): probe build (sub-step slices as "place" events with a = step)
source scratch/dev_env.sh
DEADLINE=120
L="scratch/bin/loom_probe moe --gpus 1 --impl fused"
for T in 1 128; do
  t dec$T 25 $L --tokens $T --experts 64 --topk 8 --iters 10 --trace $OUT/tr_dec$T.json
done
t e32_4096 25 $L --tokens 4096 --iters 10 --trace $OUT/tr_4096.json
gzip $OUT/*.json 2>/dev/null
pack
cat $S
