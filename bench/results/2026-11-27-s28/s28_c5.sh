#!/bin/bash
# session 28, call 5 (4-GPU machine, --gpus 2): the one-shot rule on 2 GPUs, where it takes
# partials up to 1 MiB (64 tokens at hidden 8192): automatic against two-shot forced, alternating
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 14336"
F="--check-tokens 16 --iters 100 --warmup 10 --hidden 128 --ffn 256 --tokens 256"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
for r in 1 2; do
  for v in auto two; do
    E=X=1; [ $v = two ] && E=LOOM_AR_ONE_SHOT=0
    I=fused; [ $v = auto ] && [ $r = 1 ] && I=both
    for T in 16 32 64; do f ar$T-$r-$v $E $B/loom gemm-ar --gpus 2 --impl $I $L --tokens $T; done
    f arfloor-$r-$v $E $B/loom gemm-ar --gpus 2 --impl $I $F
  done
done
for f in $OUT/logs/*-[12]*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
