#!/bin/bash
# session 25, call 3 (4 GPUs): the tile rule per operator (coll_wide_ok:
# the wide tile between half a wave and one only for k >= 4096 and, in the
# all-gather, n >= 2048) and the lockstep form's piece size (the fewest
# rows a block pushes; LOOM_AG_PIECE_ROWS=1 the rule before). GPU tests
# (loopback beside them on GPU 3), then the 256-1024-token points, the
# bias, the decode points (issue 12's grid is call 4).
source scratch/dev_env.sh
B=scratch/bin
mkdir -p build && cp $B/loom build/loom
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
( export CUDA_VISIBLE_DEVICES=3
  timeout 330 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(grep -c FAIL $OUT/logs/coll-loop.log) FAIL lines | $(tail -1 $OUT/logs/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 240 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
wait $LP; cat $OUT/loop_rc.txt >> $S
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
f ag-t512 X=1 $B/loom ag-gemm --gpus 4 --impl both $L --tokens 128
f ag-t512-p1 LOOM_AG_PIECE_ROWS=1 $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 128
f ag-t512-p8 LOOM_AG_PIECE_ROWS=8 $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 128
f ag-t512-narrow LOOM_AG_TILE=narrow $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 128
f ag-t256 X=1 $B/loom ag-gemm --gpus 4 --impl both $L --tokens 64
f ag-g2-t256 X=1 $B/loom ag-gemm --gpus 2 --impl both $L --tokens 128
f ag-t1024 X=1 $B/loom ag-gemm --gpus 4 --impl both $L --tokens 256
f rs-t512 X=1 $B/loom gemm-rs --gpus 4 --impl both $L --tokens 512
f ar-t512 X=1 $B/loom gemm-ar --gpus 4 --impl both $L --tokens 512
f rs-t256 X=1 $B/loom gemm-rs --gpus 4 --impl both $L --tokens 256
f ar-t256 X=1 $B/loom gemm-ar --gpus 4 --impl both $L --tokens 256
f ag-t512-bias X=1 $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 128 --bias 1
for tok in 16 128; do
  f ag-t$tok X=1 $B/loom ag-gemm --gpus 4 --impl both $L --tokens $(( tok / 4 ))
  f rs-t$tok X=1 $B/loom gemm-rs --gpus 4 --impl both $L --tokens $tok
  f ar-t$tok X=1 $B/loom gemm-ar --gpus 4 --impl both $L --tokens $tok
done
for f in $OUT/logs/*-t*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
