#!/bin/bash
# session 19 call 5 (1 GPU): head-latency changes (parallel header checks, credits before barrier 1,
# warp scans, top-k butterflies + interleaved softmax) against 3182ec3 (loom_base); MoE tests
source scratch/dev_env.sh
DEADLINE=540
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
t moe-loopback 150 scratch/bin/test_moe loopback --every 7
t seq-loopback 100 scratch/bin/test_sequence loopback --calls 3
t faults-loopback 60 scratch/bin/test_faults loopback
t moe-single 200 scratch/bin/test_moe single
for r in 1 2; do
for v in base new; do
B=scratch/bin/loom; [ $v = base ] && B=scratch/bin/loom_base
L="$B moe --gpus 1 --impl fused"
t dec-$v$r 30 $L --tokens 1,16,128,512 --experts 64 --topk 8 --iters 30
t grid-$v$r 30 $L --tokens 4096,16384 --iters 20
t qwen-$v$r 30 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
done; done
for T in 1 128; do t tr$T 20 scratch/bin/loom moe --gpus 1 --impl fused --tokens $T --experts 64 --topk 8 --iters 5 --trace $OUT/tr_dec$T.json; done
t tr4096 20 scratch/bin/loom moe --gpus 1 --impl fused --tokens 4096 --iters 5 --trace $OUT/tr_4096.json
for f in $OUT/tr_*.json; do python3 bench/trace_stats.py $f > ${f%.json}.txt 2>&1; done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ')" >> $S; done
pack
cat $S
