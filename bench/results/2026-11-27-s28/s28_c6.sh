#!/bin/bash
# session 28, call 6 (1 GPU): after folding the one-tile and one-shot launch setup into one branch
# (host code of gemm_rs.cu only): test_collective loopback (R = 2, 4, 8 on one GPU; alternates the
# one-shot mode, the one-tile mode and the rest) and single (R = 1)
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t coll-loopback 280 $B/test_collective loopback
t coll-single 120 $B/test_collective single
pack; cat $S
