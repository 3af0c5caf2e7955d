#!/bin/bash
# session 25, call 2 (4 GPUs): the bias (test_collective multi and
# loopback; every other case has one), the all-gather's lockstep form
# (every task waits for every source; LOOM_AG_LOCKSTEP=0 the per-source
# wait), and the tile rule (ping-pong only where at most half the SMs get a
# wide tile; LOOM_AG_TILE=narrow gives session 24's choice below one wave).
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
( export CUDA_VISIBLE_DEVICES=3
  timeout 330 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(grep -c FAIL $OUT/logs/coll-loop.log) FAIL lines | $(tail -1 $OUT/logs/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 240 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
wait $LP; cat $OUT/loop_rc.txt >> $S
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
f ag-t256 X=1 $B/loom ag-gemm --gpus 4 --impl both $L --tokens 64
f ag-t256-nolock LOOM_AG_LOCKSTEP=0 $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 64
f ag-t512 X=1 $B/loom ag-gemm --gpus 4 --impl both $L --tokens 128
f ag-t512-narrow LOOM_AG_TILE=narrow $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 128
f ag-t512-nolock LOOM_AG_LOCKSTEP=0 $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 128
f ag-t512-old "LOOM_AG_LOCKSTEP=0 LOOM_AG_TILE=narrow" $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 128
f ag-t1024 X=1 $B/loom ag-gemm --gpus 4 --impl both $L --tokens 256
f ag-t128 X=1 $B/loom ag-gemm --gpus 4 --impl both $L --tokens 32
f rs-t512 X=1 $B/loom gemm-rs --gpus 4 --impl both $L --tokens 512
f rs-t512-narrow LOOM_AG_TILE=narrow $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 512
f ar-t512 X=1 $B/loom gemm-ar --gpus 4 --impl both $L --tokens 512
f ar-t512-narrow LOOM_AG_TILE=narrow $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 512
f ag-t512-bias X=1 $B/loom ag-gemm --gpus 4 --impl both $L --tokens 128 --bias 1
f rs-t512-bias X=1 $B/loom gemm-rs --gpus 4 --impl both $L --tokens 512 --bias 1
f ar-t512-bias X=1 $B/loom gemm-ar --gpus 4 --impl both $L --tokens 512 --bias 1
f ag-g2-t256 X=1 $B/loom ag-gemm --gpus 2 --impl both $L --tokens 128
f ag-g2-t256-nolock LOOM_AG_LOCKSTEP=0 $B/loom ag-gemm --gpus 2 --impl fused $L --tokens 128
M="--check-tokens 16 --iters 20 --warmup 5"
f mk-ag-8192 X=1 $B/loom ag-gemm --gpus 4 --impl both $M --tokens 2048 --hidden 8192 --ffn 2048
f mk-ag-8192-narrow LOOM_AG_TILE=narrow $B/loom ag-gemm --gpus 4 --impl fused $M --tokens 2048 --hidden 8192 --ffn 2048
f mk-rs-8192 X=1 $B/loom gemm-rs --gpus 4 --impl both $M --tokens 8192 --hidden 512 --ffn 8192
f mk-rs-8192-narrow LOOM_AG_TILE=narrow $B/loom gemm-rs --gpus 4 --impl fused $M --tokens 8192 --hidden 512 --ffn 8192
f mk-ar-8192 X=1 $B/loom gemm-ar --gpus 4 --impl both $M --tokens 8192 --hidden 512 --ffn 8192
f mk-ar-8192-narrow LOOM_AG_TILE=narrow $B/loom gemm-ar --gpus 4 --impl fused $M --tokens 8192 --hidden 512 --ffn 8192
for f in $OUT/logs/*-t*.log $OUT/logs/mk-*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
