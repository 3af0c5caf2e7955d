#!/bin/bash
# session 18 call 6 (x4): final tree (gate v3 + one-search decode + CLI weights per expert) against 772a5d1 (base); multi-GPU tests; issue 11 points
source scratch/dev_env.sh
DEADLINE=480
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
t moe-multi 90 scratch/bin/test_moe multi --every 7
t seq-multi 60 scratch/bin/test_sequence multi --calls 3
t faults-multi 60 scratch/bin/test_faults multi
t moe-single 40 scratch/bin/test_moe single --every 7
t moe-loopback 60 scratch/bin/test_moe loopback --every 7
t grid-both 60 scratch/bin/loom moe --gpus $N --impl both --tokens 4096,8192,16384 --iters 20
for r in 1; do
for v in base new; do
B=scratch/bin/loom; [ $v = base ] && B=scratch/bin/loom_base
L="$B moe --gpus $N --impl fused"
t grid-$v$r 40 $L --tokens 4096,8192,16384 --iters 20
t qwen-$v$r 30 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t dec-$v$r 30 $L --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
done; done
t qwen-both 40 scratch/bin/loom moe --gpus $N --impl both --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t dec-both 40 scratch/bin/loom moe --gpus $N --impl both --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
t fp32-both 40 scratch/bin/loom moe --gpus $N --impl both --tokens 16384 --dtype fp32 --iters 10
t weak2 30 scratch/bin/loom moe --gpus 2 --impl fused --tokens 8192 --iters 20
t dsv3 120 scratch/bin/loom moe --gpus $N --tokens 4096 --experts 256 --topk 8 --hidden 7168 --ffn 2048 --act swiglu --iters 10 --check-tokens 16
t trace 40 scratch/bin/loom moe --gpus $N --impl fused --tokens 16384 --iters 5 --trace $OUT/trace16k.json
python3 bench/trace_stats.py $OUT/trace16k.json > $OUT/trace16k.txt 2>&1
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ') | $(grep -o 'gate [0-9]*' $f | tr '\n' ' ')" >> $S; done
pack
cat $S
