#!/bin/bash
# session 19 call 16 (x1): review fix -- moe_counts' header checks loop over sources l, l+32, ... (R up to 64); tests + timing
source scratch/dev_env.sh
DEADLINE=300
t moe-loopback 100 scratch/bin/test_moe loopback --every 7
t faults-loopback 60 scratch/bin/test_faults loopback
t seq-loopback 40 scratch/bin/test_sequence loopback --calls 3
t moe-single 90 scratch/bin/test_moe single
t grid 25 scratch/bin/loom moe --gpus 1 --impl fused --tokens 4096,16384 --iters 20
t dec 25 scratch/bin/loom moe --gpus 1 --impl fused --tokens 1,128 --experts 64 --topk 8 --iters 30
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ')" >> $S; done
pack
cat $S
