#!/bin/bash
# session 18 call 1 (1 GPU): the gate stream (new) against 772a5d1 (base), alternating; MoE tests; CLI per-expert weights (E = 256, H = 7168)
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
t moe-single 120 scratch/bin/test_moe single --every 7
t moe-loopback 120 scratch/bin/test_moe loopback --every 7
for r in 1 2; do
for v in base new; do
B=scratch/bin/loom; [ $v = base ] && B=scratch/bin/loom_base
L="$B moe --gpus 1 --impl fused"
t grid-$v$r 40 $L --tokens 4096,16384 --iters 20
t e8-$v$r 40 $L --tokens 16384 --experts 8 --iters 20
t qwen-$v$r 40 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t dec-$v$r 40 $L --tokens 1,128,512 --experts 64 --topk 8 --iters 30
done; done
t trace-new 40 scratch/bin/loom moe --gpus 1 --impl fused --tokens 16384 --iters 3 --trace $OUT/trace_new.json
t dsv3 150 scratch/bin/loom moe --gpus 1 --tokens 128 --experts 256 --topk 8 --hidden 7168 --ffn 2048 --act swiglu --iters 10 --check-tokens 16
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ') | $(grep -o 'gate [0-9]*' $f | tr '\n' ' ')" >> $S; done
pack
cat $S
