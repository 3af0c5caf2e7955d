#!/bin/bash
# session 17 call 1 (x4): task order lag + foreground share; tests, A/B, trace
source scratch/dev_env.sh
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
M="build/loom moe --gpus $N --impl fused --iters 20"
t moe-multi 90 build/tests/test_moe multi --every 7
for v in "0 0" "1 1" "2 1" "1 2" "1 0" "2 2" "3 1"; do
  set -- $v
  LOOM_MOE_LAG=$1 LOOM_MOE_FG=$2 t grid-L$1-F$2 40 $M --tokens 4096,8192,16384
done
for v in "0 0" "1 1" "2 1"; do
  set -- $v
  LOOM_MOE_LAG=$1 LOOM_MOE_FG=$2 t qwen-L$1-F$2 30 $M --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu
  LOOM_MOE_LAG=$1 LOOM_MOE_FG=$2 t dec-L$1-F$2 30 $M --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
done
LOOM_MOE_LAG=1 LOOM_MOE_FG=1 t trace-L1-F1 40 $M --tokens 16384 --iters 5 --trace $OUT/trace16k_L1F1.json
LOOM_MOE_LAG=0 LOOM_MOE_FG=0 t trace-L0-F0 40 $M --tokens 16384 --iters 5 --trace $OUT/trace16k_L0F0.json
LOOM_MOE_LAG=3 LOOM_MOE_FG=0 t moe-multi-L3F0 90 build/tests/test_moe multi --every 7
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ fused' $f | awk '{print $1" "$3}' | tr '\n' ' ')" >> $S; done
pack
cat $S
