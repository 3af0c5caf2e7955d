#!/bin/bash
# session 18 call 5 (1 GPU): gate v3 (stream, 16-expert passes, batched top-k) against 772a5d1 (base); MoE tests
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
t moe-single 200 scratch/bin/test_moe single
t moe-loopback 120 scratch/bin/test_moe loopback --every 7
t seq-loopback 120 scratch/bin/test_sequence loopback --calls 3
for r in 1 2; do
for v in base new; do
B=scratch/bin/loom; [ $v = base ] && B=scratch/bin/loom_base
L="$B moe --gpus 1 --impl fused"
t grid-$v$r 40 $L --tokens 4096,16384 --iters 20
t e8-$v$r 40 $L --tokens 16384 --experts 8 --iters 20
t qwen-$v$r 40 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t dec-$v$r 40 $L --tokens 1,128,512 --experts 64 --topk 8 --iters 30
t fp32-$v$r 40 $L --tokens 16384 --dtype fp32 --iters 10
done; done
t inout-new 60 scratch/bin/loom moe --gpus 1 --tokens 4096 --weights in-out --iters 5
t inout-base 60 scratch/bin/loom_base moe --gpus 1 --tokens 4096 --weights in-out --iters 5
t trace-new 40 scratch/bin/loom moe --gpus 1 --impl fused --tokens 16384 --iters 3 --trace $OUT/trace_new.json
t trace-qwen 40 scratch/bin/loom moe --gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 3 --trace $OUT/trace_qwen.json
L="scratch/bin/loom_v3s moe --gpus 1 --impl fused --iters 3"
t v3s-e32 40 $L --tokens 16384 --trace $OUT/tr_v3s_e32.json
t v3s-qwen 40 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --trace $OUT/tr_v3s_qwen.json
t v3s-dec128 40 $L --tokens 128 --experts 64 --topk 8 --trace $OUT/tr_v3s_dec128.json
for f in $OUT/tr_*.json; do echo "== $(basename $f)" >> $S; python3 bench/trace_stats.py $f 2>&1 | grep -E "^  (gate|wait header) " >> $S; done
for f in $OUT/trace_*.json; do python3 bench/trace_stats.py $f > ${f%.json}.txt 2>&1; done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ') | $(grep -o 'gate [0-9]*' $f | tr '\n' ' ')" >> $S; done
pack
cat $S
