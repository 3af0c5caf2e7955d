#!/bin/bash
# session 19 call 6 (x4): the head changes (parallel header checks, credits before barrier 1,
# warp scans) against 3182ec3 (loom_base), alternating; multi-GPU tests; traces
source scratch/dev_env.sh
DEADLINE=420
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
t moe-multi 60 scratch/bin/test_moe multi --every 7
t seq-multi 40 scratch/bin/test_sequence multi --calls 3
t faults-multi 40 scratch/bin/test_faults multi
for r in 1 2; do
for v in base new; do
B=scratch/bin/loom; [ $v = base ] && B=scratch/bin/loom_base
L="$B moe --gpus $N --impl fused"
t dec-$v$r 30 $L --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
t grid-$v$r 30 $L --tokens 4096,8192,16384 --iters 20
t qwen-$v$r 30 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
done; done
L="scratch/bin/loom moe --gpus $N --impl both"
t both-grid 40 $L --tokens 4096,8192,16384 --iters 20
t both-dec 40 $L --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
t both-qwen 40 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t tr128 30 scratch/bin/loom moe --gpus $N --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr_dec128.json
t tr16k 30 scratch/bin/loom moe --gpus $N --impl fused --tokens 16384 --iters 5 --trace $OUT/tr_16k.json
for f in $OUT/tr_*.json; do python3 bench/trace_stats.py $f > ${f%.json}.txt 2>&1; done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ') | $(grep -o 'gate [0-9]*' $f | tr '\n' ' ')" >> $S; done
pack
cat $S
