#!/bin/bash
# session 17 call 3 (x4): register splits a (72/216 U8), c (56/224 U6), b (40/232 U4) at LAG=0 FG=1
source scratch/dev_env.sh
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
for v in a b c; do eval "$(echo $v | tr a-c A-C)=\"scratch/bin/loom_$v moe --gpus $N --impl fused --iters 20\""; done
g() { local name=$1 lag=$2 fg=$3; shift 3; LOOM_MOE_LAG=$lag LOOM_MOE_FG=$fg t $name 40 "$@"; }
LOOM_MOE_LAG=0 LOOM_MOE_FG=1 t moe-multi-a 90 scratch/bin/test_moe_a multi --every 7
for r in 1 2; do
g grid-b-L0F0-$r 0 0 $B --tokens 4096,8192,16384
g grid-b-L0F1-$r 0 1 $B --tokens 4096,8192,16384
g grid-a-L0F1-$r 0 1 $A --tokens 4096,8192,16384
g grid-c-L0F1-$r 0 1 $C --tokens 4096,8192,16384
done
g grid-c-L4F1 4 1 $C --tokens 4096,8192,16384
g qwen-a-L0F1 0 1 $A --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu
g qwen-c-L0F1 0 1 $C --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu
g fp32-b-L0F0 0 0 $B --tokens 16384 --dtype fp32 --iters 10
g fp32-a-L0F1 0 1 $A --tokens 16384 --dtype fp32 --iters 10
g fp32-c-L0F1 0 1 $C --tokens 16384 --dtype fp32 --iters 10
g fp32-b-L0F1 0 1 $B --tokens 16384 --dtype fp32 --iters 10
g dec-c-L0F1 0 1 $C --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
g trace-c-L0F1 0 1 $C --tokens 16384 --iters 5 --trace $OUT/trace16k_cL0F1.json
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ fused' $f | awk '{print $1" "$3}' | tr '\n' ' ')" >> $S; done
pack
grep -v "rc=0" $S
