#!/bin/bash
# session 21, call 1 (4 GPUs): 592f6a6 (loom_poll_flag_stop) under the
# collective tests; its reduce-scatter / all-reduce beside loom_base
# (5b82eb5) for the ratio of session 20's call 4; then the all-gather
# probes (loom_probe = HEAD + ag_probe + per-group end stamps g0..g3):
# real, pushes skipped, GEMM skipped, the full per-GPU GEMM on 1 GPU.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 > $OUT/smi.csv 2>&1 &
SMI=$!
( CUDA_VISIBLE_DEVICES=3 timeout 220 $B/test_collective loopback > $OUT/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 150 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
wait $LP; cat $OUT/loop_rc.txt >> $S
L="--tokens 4096 --hidden 8192 --ffn 28672 --iters 20 --warmup 5 --check-tokens 16"
mark() { echo "$1 $(date +%s.%N)" >> $OUT/marks.txt; }
mark ag-real; t ag-real 60 $B/loom_probe ag-gemm --gpus 4 $L --impl both
mark ag-head; t ag-head 60 $B/loom ag-gemm --gpus 4 $L --impl fused
mark ag-nopush; LOOM_PROBE_NO_VERIFY=1 LOOM_PROBE_AG_NO_PUSH=1 t ag-nopush 60 $B/loom_probe ag-gemm --gpus 4 $L --impl fused
mark ag-nogemm; LOOM_PROBE_NO_VERIFY=1 LOOM_PROBE_AG_NO_GEMM=1 t ag-nogemm 60 $B/loom_probe ag-gemm --gpus 4 $L --impl fused
mark ag-narrow; LOOM_AG_TILE=narrow t ag-narrow 60 $B/loom_probe ag-gemm --gpus 4 $L --impl fused
mark ag-1gpu-full; t ag-1gpu-full 60 $B/loom_probe ag-gemm --gpus 1 --tokens 16384 --hidden 8192 --ffn 7168 --iters 20 --warmup 5 --check-tokens 16 --impl both
mark ag-1024; t ag-1024 60 $B/loom_probe ag-gemm --gpus 4 --tokens 1024 --hidden 8192 --ffn 28672 --iters 20 --warmup 5 --check-tokens 16 --impl fused
mark ag-fp32; t ag-fp32 60 $B/loom_probe ag-gemm --gpus 4 --dtype fp32 --tokens 1024 --hidden 8192 --ffn 28672 --iters 20 --warmup 5 --check-tokens 16 --impl fused
mark rsar
for b in loom_base loom; do
  C="--gpus 4 --check-tokens 16 --impl fused"
  [ $b = loom ] && C="--gpus 4 --check-tokens 16 --impl both"
  for m in 4096 16384; do
    t rs-mk$m-$b 30 $B/$b gemm-rs $C --iters 50 --tokens $m --hidden $((m / 16)) --ffn $m
    t ar-mk$m-$b 30 $B/$b gemm-ar $C --iters 50 --tokens $m --hidden $((m / 16)) --ffn $m
  done
  t rs-floor-$b 20 $B/$b gemm-rs $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
  t ar-floor-$b 20 $B/$b gemm-ar $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
done
kill $SMI
for f in $OUT/ag*.log $OUT/r*.log $OUT/ar*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | cut -c1-200 | tr '\n' ' ')"; done >> $S
gzip $OUT/smi.csv
pack; cat $S
