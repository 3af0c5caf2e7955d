#!/bin/bash
# session 19 call 15 (x4): 2cd3655 (SiLU on the ftz SFU ops) against 701c2b5, alternating; multi-GPU tests; --impl both
source scratch/dev_env.sh
DEADLINE=330
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
t moe-multi 60 scratch/bin/test_moe multi --every 7
t seq-multi 30 scratch/bin/test_sequence multi --calls 3
t faults-multi 30 scratch/bin/test_faults multi
for r in 1 2; do for v in base new; do
  B=scratch/bin/loom; [ $v = base ] && B=scratch/bin/loom_base
  t grid-$v$r 25 $B moe --gpus $N --impl fused --tokens 4096,8192,16384 --iters 20
  t dec-$v$r 25 $B moe --gpus $N --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
done; done
t both-grid 35 scratch/bin/loom moe --gpus $N --impl both --tokens 4096,8192,16384 --iters 20
t both-qwen 30 scratch/bin/loom moe --gpus $N --impl both --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3" "$10}' | tr '\n' ' ')" >> $S; done
pack
cat $S
