#!/bin/bash
# session 17 call 5 (x2: x4 no longer lent): final tree: tests, issue 11 points with the baseline, trace, other model shapes (default vs LOOM_MOE_FG=0)
source scratch/dev_env.sh
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
L="scratch/bin/loom moe --gpus $N"
t moe-multi 90 scratch/bin/test_moe multi --every 7
t seq-multi 40 scratch/bin/test_sequence multi
t faults-multi 60 scratch/bin/test_faults multi
t moe-grid 60 $L --tokens 4096,8192,16384 --iters 20
t moe-qwen3 40 $L --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t moe-decode 60 $L --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
t moe-fp32 40 $L --tokens 16384 --dtype fp32 --iters 10

t moe-trace 40 $L --impl fused --tokens 16384 --iters 5 --trace $OUT/trace16k.json
t dsv2lite 40 $L --tokens 8192 --experts 64 --topk 6 --ffn 1408 --act swiglu --iters 20
t mixtral 60 $L --tokens 4096 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10
t h7168 40 $L --tokens 4096 --experts 32 --topk 2 --hidden 7168 --ffn 2048 --iters 20
export LOOM_MOE_FG=0
t fg0-grid 40 $L --impl fused --tokens 4096,8192,16384 --iters 20
t fg0-dsv2lite 40 $L --impl fused --tokens 8192 --experts 64 --topk 6 --ffn 1408 --act swiglu --iters 20
t fg0-mixtral 60 $L --impl fused --tokens 4096 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10
t fg0-h7168 40 $L --impl fused --tokens 4096 --experts 32 --topk 2 --hidden 7168 --ffn 2048 --iters 20
unset LOOM_MOE_FG
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ')" >> $S; done
pack
cat $S | grep -v "rc=0 .*|  "
