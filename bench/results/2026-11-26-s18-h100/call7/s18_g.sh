#!/bin/bash
# session 18 call 7 (x4): local first (own rows first in each expert's GEMM order, matching dispatch order, own expert-0 rows as the only foreground share) vs off, same binary (LOOM_MOE_LOCAL_FIRST); multi-GPU tests; DeepSeek-V3-like shape with the baseline's new weight tolerance
source scratch/dev_env.sh
DEADLINE=420
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
t moe-multi 90 scratch/bin/test_moe multi --every 7
t seq-multi 60 scratch/bin/test_sequence multi --calls 3
t faults-multi 60 scratch/bin/test_faults multi
t moe-loopback 60 scratch/bin/test_moe loopback --every 7
L="scratch/bin/loom moe --gpus $N --impl fused"
for r in 1 2; do
for v in 0 1; do
LOOM_MOE_LOCAL_FIRST=$v t grid-lf$v-$r 40 $L --tokens 4096,8192,16384 --iters 20
LOOM_MOE_LOCAL_FIRST=$v t qwen-lf$v-$r 30 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
LOOM_MOE_LOCAL_FIRST=$v t dec-lf$v-$r 30 $L --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
done; done
t trace-lf1 40 $L --tokens 16384 --iters 5 --trace $OUT/trace16k_lf1.json
python3 bench/trace_stats.py $OUT/trace16k_lf1.json > $OUT/trace16k_lf1.txt 2>&1
t dsv3 120 scratch/bin/loom moe --gpus $N --tokens 4096 --experts 256 --topk 8 --hidden 7168 --ffn 2048 --act swiglu --iters 10 --check-tokens 16
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ') | $(grep -o 'gate [0-9]*\|dispatch [0-9]*' $f | tr '\n' ' ')" >> $S; done
pack
cat $S
