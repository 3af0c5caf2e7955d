#!/bin/bash
# session 19 call 8 (x4): W1 prefix prefetched into L2 in the head (decode regime), budget by env
# (LOOM_MOE_PREFETCH_MB=0 off / 16 / default = half the L2 / 40), alternating, beside 3182ec3 (loom_base); tests
source scratch/dev_env.sh
DEADLINE=420
N=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,power.limit --format=csv > $OUT/smi.txt 2>&1
t moe-multi 60 scratch/bin/test_moe multi --every 7
t seq-multi 40 scratch/bin/test_sequence multi --calls 3
D="--tokens 1,16,128,512 --experts 64 --topk 8 --iters 50"
for r in 1 2; do
  for v in off 16 dflt 40; do
    case $v in off) P=0;; dflt) P=;; *) P=$v;; esac
    t dec-$v$r 30 env LOOM_MOE_PREFETCH_MB=$P scratch/bin/loom moe --gpus $N --impl fused $D
  done
  t dec-base$r 30 scratch/bin/loom_base moe --gpus $N --impl fused $D
done
t dec-e32 30 scratch/bin/loom moe --gpus $N --impl fused --tokens 1,64,256 --iters 50
t dec-e32-off 30 env LOOM_MOE_PREFETCH_MB=0 scratch/bin/loom moe --gpus $N --impl fused --tokens 1,64,256 --iters 50
t dec-mix 30 scratch/bin/loom moe --gpus $N --impl fused --tokens 16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --iters 30
t dec-mix-off 30 env LOOM_MOE_PREFETCH_MB=0 scratch/bin/loom moe --gpus $N --impl fused --tokens 16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --iters 30
t both-dec 40 scratch/bin/loom moe --gpus $N --impl both $D
t tr128 30 scratch/bin/loom moe --gpus $N --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr_dec128.json
for f in $OUT/tr_*.json; do python3 bench/trace_stats.py $f > ${f%.json}.txt 2>&1; done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ')" >> $S; done
pack
cat $S
