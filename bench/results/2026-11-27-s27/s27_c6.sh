#!/bin/bash
# session 27, call 6 (1 GPU): the final tree's collective tests at R = 1 and on loopback (R = 2, 4, 8
# on one GPU; rs_slices' rule now differs between R = 2 and R >= 4)
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-loop 400 $B/test_collective loopback
t coll-single 150 $B/test_collective single
echo "coll-loop FAIL lines: $(grep -c FAIL $OUT/logs/coll-loop.log)" >> $S
pack; cat $S
