#!/bin/bash
# session 24, call 6 (1 GPU): the bias (loom_gemm_args_t.bias; every other
# test_collective case has one): single (R = 1: the all-gather kernel for
# all three operators) and loopback (R = 2, 4, 8 on one GPU), bounded to
# what device time is left.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
t coll-single 60 $B/test_collective single
timeout 215 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(grep -c FAIL $OUT/logs/coll-loop.log) FAIL lines | $(grep 'done in' $OUT/logs/coll-loop.log | tail -2 | tr '\n' ' ') | $(tail -1 $OUT/logs/coll-loop.log)" >> $S
pack; cat $S
