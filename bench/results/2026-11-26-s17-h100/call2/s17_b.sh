#!/bin/bash
# session 17 call 2 (x4): register split A (72/216, U=8) vs B (40/232, U=4), task order lag (waves), fg share
source scratch/dev_env.sh
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
A="scratch/bin/loom_a moe --gpus $N --impl fused --iters 20"
B="scratch/bin/loom_b moe --gpus $N --impl fused --iters 20"
t moe-multi-a 90 scratch/bin/test_moe_a multi --every 7
g() { local name=$1 lag=$2 fg=$3; shift 3; LOOM_MOE_LAG=$lag LOOM_MOE_FG=$fg t $name 40 "$@"; }
g grid-b-L0F0 0 0 $B --tokens 4096,8192,16384
g grid-b-L2F1 2 1 $B --tokens 4096,8192,16384
g grid-a-L0F0 0 0 $A --tokens 4096,8192,16384
g grid-a-L0F1 0 1 $A --tokens 4096,8192,16384
g grid-a-L1F1 1 1 $A --tokens 4096,8192,16384
g grid-a-L2F1 2 1 $A --tokens 4096,8192,16384
g grid-a-L4F1 4 1 $A --tokens 4096,8192,16384
g grid-a-L2F2 2 2 $A --tokens 4096,8192,16384
g grid-b-L0F0r 0 0 $B --tokens 4096,8192,16384
for v in "b 0 0" "a 2 1" "a 0 1"; do
  set -- $v; X=$([ $1 = a ] && echo "$A" || echo "$B")
  g qwen-$1-L$2F$3 $2 $3 $X --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu
  g dec-$1-L$2F$3 $2 $3 $X --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
done
g fp32-b-L0F0 0 0 $B --tokens 16384 --dtype fp32 --iters 10
g fp32-a-L2F1 2 1 $A --tokens 16384 --dtype fp32 --iters 10
g trace-a-L2F1 2 1 $A --tokens 16384 --iters 5 --trace $OUT/trace16k_aL2F1.json
g trace-a-L0F1 0 1 $A --tokens 16384 --iters 5 --trace $OUT/trace16k_aL0F1.json
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ fused' $f | awk '{print $1" "$3}' | tr '\n' ' ')" >> $S; done
pack
cat $S
