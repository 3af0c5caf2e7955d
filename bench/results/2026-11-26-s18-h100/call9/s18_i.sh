#!/bin/bash
# session 18 call 9 (x4): the final tree (default LOOM_MOE_LOCAL_FIRST=2), fused beside the baseline; tests
source scratch/dev_env.sh
DEADLINE=200
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
t seq-multi 40 scratch/bin/test_sequence multi --calls 3
t faults-multi 40 scratch/bin/test_faults multi
t moe-loopback 50 scratch/bin/test_moe loopback --every 7
L="scratch/bin/loom moe --gpus $N --impl both"
t grid 40 $L --tokens 4096,8192,16384 --iters 20
t qwen 30 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t dec 30 $L --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
t fp32 30 $L --tokens 16384 --dtype fp32 --iters 10
t weak2 20 scratch/bin/loom moe --gpus 2 --impl fused --tokens 8192 --iters 20
t trace 30 scratch/bin/loom moe --gpus $N --impl fused --tokens 16384 --iters 5 --trace $OUT/trace16k.json
python3 bench/trace_stats.py $OUT/trace16k.json > $OUT/trace16k.txt 2>&1
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3" "$10}' | tr '\n' ' ')" >> $S; done
pack
cat $S
