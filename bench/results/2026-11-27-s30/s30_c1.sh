#!/bin/bash
# session 30, call 1 (1 GPU): the tagged partials (one-tile and one-shot modes) on the loopback
# worlds (R = 2, 4, 8 on one GPU, LOOM_LL alternated by the test, the fault runs at m = 20 tagged),
# world size 1, and test_sequence's loopback calls.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-single 60 $B/test_collective single
t coll-loop 400 $B/test_collective loopback
grep -c FAIL $OUT/logs/coll-loop.log >> $S
grep FAIL $OUT/logs/coll-loop.log | head -20 >> $S
t seq-loop 150 $B/test_sequence loopback --calls 3
pack; cat $S
