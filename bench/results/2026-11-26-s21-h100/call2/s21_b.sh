#!/bin/bash
# session 21, call 2 (4 GPUs): the all-gather pushes as bulk copies (TMA,
# one thread, 4 x 8 KB staging ring): tests with the bulk build, then
# HEAD (loom) / bulk (loom_bulk) / bulk + evict_first stores (loom_bulkh)
# alternating on the all-gather points.
source scratch/dev_env.sh
B=scratch/bin
( CUDA_VISIBLE_DEVICES=3 timeout 220 $B/test_collective loopback > $OUT/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 150 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
wait $LP; cat $OUT/loop_rc.txt >> $S
L="--check-tokens 16 --iters 20 --warmup 5"
for rep in 1 2; do
  for b in loom loom_bulk loom_bulkh; do
    I="--impl fused"; [ $rep = 2 ] && [ $b = loom_bulk ] && I="--impl both"
    t ag-llama-$b-$rep 60 $B/$b ag-gemm --gpus 4 $L $I --tokens 1024,4096 --hidden 8192 --ffn 28672
  done
done
for b in loom loom_bulk loom_bulkh; do
  I="--impl fused"; [ $b = loom_bulk ] && I="--impl both"
  t ag-fp32-$b 60 $B/$b ag-gemm --gpus 4 $L $I --dtype fp32 --tokens 1024,4096 --hidden 8192 --ffn 28672
  for m in 4096 8192 16384; do
    t ag-mk$m-$b 30 $B/$b ag-gemm --gpus 4 $L $I --tokens $((m / 4)) --hidden $m --ffn $((m / 4))
  done
  t ag-floor-$b 20 $B/$b ag-gemm --gpus 4 --check-tokens 16 --iters 100 --warmup 10 $I --tokens 64 --hidden 128 --ffn 256
done
for f in $OUT/ag*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-120 | tr '\n' ' ')"; done >> $S
pack; cat $S
