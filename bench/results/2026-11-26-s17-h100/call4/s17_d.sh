#!/bin/bash
# session 17 call 4 (x4): tests of the new defaults (e), e vs c (old combine), headline runs of e with the baseline
source scratch/dev_env.sh
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
E="scratch/bin/loom_e moe --gpus $N --iters 20"
C="scratch/bin/loom_c moe --gpus $N --iters 20 --impl fused"
t moe-multi 90 scratch/bin/test_moe multi --every 7
t seq-multi 40 scratch/bin/test_sequence multi
t faults-multi 60 scratch/bin/test_faults multi
for r in 1 2; do
LOOM_MOE_LAG=0 LOOM_MOE_FG=1 t grid-c-$r 40 $C --tokens 4096,8192,16384
t grid-e-$r 40 $E --impl fused --tokens 4096,8192,16384
done
t dec-c 40 env LOOM_MOE_LAG=0 LOOM_MOE_FG=1 $C --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
t trace-e 40 $E --impl fused --tokens 16384 --iters 5 --trace $OUT/trace16k_e.json
t moe-grid 60 $E --tokens 4096,8192,16384
t moe-qwen3 40 $E --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu
t moe-decode 60 $E --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
t moe-fp32 40 $E --tokens 16384 --dtype fp32 --iters 10
t moe-scale-2 30 scratch/bin/loom_e moe --gpus 2 --tokens 8192 --iters 20
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ')" >> $S; done
pack
cat $S | grep -v "rc=0"
