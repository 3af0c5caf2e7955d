#!/bin/bash
# session 20, call 1 (4 GPUs): the consumers join the reduce-scatter /
# all-reduce work items after their GEMM tasks (hop_side_after), the side
# warps' reductions with 2 loads in flight. Tests, then A/B against
# scratch/bin/loom_base (5b82eb5), alternating; an all-gather fp32 probe
# (why 0.77-0.81x of the baseline) with an nvidia-smi clock/power log.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv,noheader -lms 250 > $OUT/smi.csv 2>&1 &
SMI=$!
( CUDA_VISIBLE_DEVICES=3 timeout 200 $B/test_collective loopback > $OUT/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 150 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
wait $LP; cat $OUT/loop_rc.txt >> $S
C="--gpus 4 --check-tokens 16 --impl fused"
for rep in 1 2; do
  for b in loom_base loom; do
    C="--gpus 4 --check-tokens 16 --impl fused"
    [ $rep = 2 ] && [ $b = loom ] && C="--gpus 4 --check-tokens 16 --impl both"
    for m in 4096 8192 16384; do
      t rs-mk$m-$b-$rep 30 $B/$b gemm-rs $C --iters 50 --tokens $m --hidden $((m / 16)) --ffn $m
      t ar-mk$m-$b-$rep 30 $B/$b gemm-ar $C --iters 50 --tokens $m --hidden $((m / 16)) --ffn $m
    done
    t rs-floor-$b-$rep 20 $B/$b gemm-rs $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
    t ar-floor-$b-$rep 20 $B/$b gemm-ar $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
    t rs-llama-$b-$rep 40 $B/$b gemm-rs $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
    t ar-llama-$b-$rep 40 $B/$b gemm-ar $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
  done
done
echo "ag-fp32 start $(date +%T.%N)" >> $OUT/marks.txt
t ag-fp32-both 60 $B/loom ag-gemm --gpus 4 --check-tokens 16 --iters 20 --warmup 5 --dtype fp32 --tokens 1024 --hidden 8192 --ffn 28672 --impl both
echo "ag-fp32-narrow start $(date +%T.%N)" >> $OUT/marks.txt
LOOM_AG_TILE=narrow t ag-fp32-narrow 60 $B/loom ag-gemm --gpus 4 --check-tokens 16 --iters 20 --warmup 5 --dtype fp32 --tokens 1024 --hidden 8192 --ffn 28672 --impl fused
echo "ag-fp32-1gpu start $(date +%T.%N)" >> $OUT/marks.txt
t ag-fp32-1gpu 60 $B/loom ag-gemm --gpus 1 --check-tokens 16 --iters 20 --warmup 5 --dtype fp32 --tokens 4096 --hidden 8192 --ffn 7168 --impl both
echo "end $(date +%T.%N)" >> $OUT/marks.txt
kill $SMI
for f in $OUT/r*.log $OUT/a*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at/\1 us |/' | tr '\n' ' ')"; done >> $S
pack; cat $S
