#!/bin/bash
# session 19 call 4 (x1): probe build: gate finisher split into arrival / readback / bad / select / softmax / counts
source scratch/dev_env.sh
DEADLINE=100
for T in 1 128; do t tr$T 20 scratch/bin/loom_probe moe --gpus 1 --impl fused --tokens $T --experts 64 --topk 8 --iters 5 --trace $OUT/tr_dec$T.json; done
t tr4096 20 scratch/bin/loom_probe moe --gpus 1 --impl fused --tokens 4096 --iters 5 --trace $OUT/tr_4096.json
gzip $OUT/*.json 2>/dev/null
pack
cat $S
