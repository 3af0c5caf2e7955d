#!/bin/bash
# session 25, call 5 (4 GPUs): the lockstep form also for sources of whole
# row blocks (m a multiple of 128: a source's last piece signals all its
# row blocks). GPU tests (loopback beside them on GPU 3), the all-gather at
# 1024 tokens (256 rows a source; LOOM_AG_LOCKSTEP=0 the group per source)
# and 512 on 2 GPUs, then issue 12's grid alone on the machine.
source scratch/dev_env.sh
B=scratch/bin
mkdir -p build && cp $B/loom build/loom
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
( export CUDA_VISIBLE_DEVICES=3
  timeout 300 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(grep -c FAIL $OUT/logs/coll-loop.log) FAIL lines | $(tail -1 $OUT/logs/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 200 $B/test_collective multi
t faults-multi 40 $B/test_faults multi
wait $LP; cat $OUT/loop_rc.txt >> $S
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
f ag-t1024 X=1 $B/loom ag-gemm --gpus 4 --impl both $L --tokens 256
f ag-t1024-nolock LOOM_AG_LOCKSTEP=0 $B/loom ag-gemm --gpus 4 --impl fused $L --tokens 256
f ag-g2-t512 X=1 $B/loom ag-gemm --gpus 2 --impl both $L --tokens 256
f ag-g2-t512-nolock LOOM_AG_LOCKSTEP=0 $B/loom ag-gemm --gpus 2 --impl fused $L --tokens 256
for f in $OUT/logs/*-t*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
t grid 200 bash bench/collective_grid.sh $OUT/grid 4
for f in $OUT/grid/*.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s | ", $1, $2, $3}')"; done >> $S
(cd $OUT && tar czf logs.tgz logs grid && rm -rf grid/*.log); cat $S
