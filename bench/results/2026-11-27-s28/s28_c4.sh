#!/bin/bash
# session 28, call 4 (4 GPUs): is the decode GEMM phase's growth from 1 to 2-4 GPUs the side role's
# flag polling (a tight loop of system-scope acquires on the NCCL window, 96 threads a block, during the
# whole GEMM)? loom (890fbe7) against loom_poll (the same tree with a 256 ns nanosleep between
# polls in loom_poll_flag_stop: poll_sleep.diff), alternating, two rounds
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
M="--check-tokens 16 --iters 40 --warmup 10"
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192"
f() { local n=$1; shift; t $n 40 "$@"; }
for r in 1 2; do
  for v in main poll; do
    X=$B/loom; [ $v = poll ] && X=$B/loom_poll
    f rs16g1-$r-$v $X gemm-rs --gpus 1 --impl fused $L --ffn 7168 --tokens 16
    f rs16g2-$r-$v $X gemm-rs --gpus 2 --impl fused $L --ffn 14336 --tokens 16
    f rs16g4-$r-$v $X gemm-rs --gpus 4 --impl fused $L --ffn 28672 --tokens 16
    f ar16g4-$r-$v $X gemm-ar --gpus 4 --impl fused $L --ffn 28672 --tokens 16
    f ag16g4-$r-$v $X ag-gemm --gpus 4 --impl fused $L --ffn 28672 --tokens 16
    f rs128g4-$r-$v $X gemm-rs --gpus 4 --impl fused $L --ffn 28672 --tokens 128
    f mkrs4k-$r-$v $X gemm-rs --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
  done
done
for f in $OUT/logs/*-[12]*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
