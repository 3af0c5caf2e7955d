#!/bin/bash
# session 29, call 4 (4x H100): every source's flag looked at together (loom_poll_flags_stop in the
# owners' polls, hop_ready_all_now in the engine's readiness, the tags in coll_check_tags).
# Tests of this tree (test_collective multi, test_moe multi; the loopback worlds, test_faults and
# test_sequence in call 5 on one GPU), then this tree (loom) against 1a21a91
# (loom_head) alternating, two rounds: the decode points, mKernel 4096, the floors, the MoE.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-multi 200 $B/test_collective multi
t moe-multi 120 $B/test_moe multi --every 7
L="--check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 28672"
M="--check-tokens 16 --iters 40 --warmup 10"
F="--check-tokens 16 --iters 100 --warmup 10 --hidden 128 --ffn 256 --tokens 256"
for r in 1 2; do
  for v in head new; do
    X=$B/loom; [ $v = head ] && X=$B/loom_head
    t rs16-$r-$v 40 $X gemm-rs --gpus 4 --impl fused $L --tokens 16
    t ar16-$r-$v 40 $X gemm-ar --gpus 4 --impl fused $L --tokens 16
    t ag16-$r-$v 40 $X ag-gemm --gpus 4 --impl fused $L --tokens 16
    t rs16g2-$r-$v 40 $X gemm-rs --gpus 2 --impl fused --check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 14336 --tokens 16
    t ar128-$r-$v 40 $X gemm-ar --gpus 4 --impl fused $L --tokens 128
    t mkrs4k-$r-$v 40 $X gemm-rs --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
    t mkar4k-$r-$v 40 $X gemm-ar --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
    t mkag4k-$r-$v 40 $X ag-gemm --gpus 4 --impl fused --tokens 1024 --hidden 4096 --ffn 1024 $M
    t rsfloor-$r-$v 40 $X gemm-rs --gpus 4 --impl fused $F
    t arfloor-$r-$v 40 $X gemm-ar --gpus 4 --impl fused $F
    t moedec-$r-$v 60 $X moe --gpus 4 --impl fused --tokens 1,128 --experts 64 --topk 8 --iters 30
    t moe4k-$r-$v 60 $X moe --gpus 4 --impl fused --tokens 4096 --iters 20
  done
done
for f in $OUT/logs/*-[12]-*.log; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | cut -c1-90 | tr '\n' ' ')"; done >> $S
pack; cat $S
