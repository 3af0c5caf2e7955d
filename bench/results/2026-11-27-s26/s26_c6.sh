#!/bin/bash
# session 26, call 6 (1 GPU): the loopback worlds (R = 2, 4, 8 on one GPU) and one rank, on the tree of call 5
source scratch/dev_env.sh
B=scratch/bin
t coll-loop 420 $B/test_collective loopback
t coll-single 120 $B/test_collective single
pack; cat $S
