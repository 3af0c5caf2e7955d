#!/bin/bash
# session 19 call 10 (x1): the gate's phase stamp back before the credit waits (phase_mark order only); tests
source scratch/dev_env.sh
DEADLINE=300
t moe-single 120 scratch/bin/test_moe single
t moe-loopback 100 scratch/bin/test_moe loopback --every 7
t seq-loopback 60 scratch/bin/test_sequence loopback --calls 3
t grid 30 scratch/bin/loom moe --gpus 1 --impl fused --tokens 4096,16384 --iters 20
t dec 30 scratch/bin/loom moe --gpus 1 --impl fused --tokens 1,128 --experts 64 --topk 8 --iters 30
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ') | $(grep -o 'phases end at.*' $f | tr '\n' ' ')" >> $S; done
pack
cat $S
