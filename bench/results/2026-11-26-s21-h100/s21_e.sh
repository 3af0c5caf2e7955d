#!/bin/bash
# session 21, call 5 (1 GPU): a_gathered (the all-gather's gathered A):
# test_collective loopback (R = 2, 4, 8 ranks on one GPU, every case: call 1
# of each all-gather case with a_gathered, verified bit for bit) and single.
source scratch/dev_env.sh
B=scratch/bin
t coll-loop 300 $B/test_collective loopback
t coll-single 60 $B/test_collective single
pack; cat $S
