#!/bin/bash
# session 23, call 7 (1 GPU): test_collective loopback with the fault runs
# at the decode size too (m = 20: the all-gather's one group, the one-tile
# mode, the decode tile), R = 2, 4, 8 on one GPU.
source scratch/dev_env.sh
B=scratch/bin
t coll-loop 420 $B/test_collective loopback
grep -E "fault of|cases done|FAIL" $OUT/logs/coll-loop.log | head -40 >> $S
pack; cat $S
