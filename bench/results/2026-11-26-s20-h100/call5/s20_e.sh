#!/bin/bash
# session 20, call 5 (1 GPU): the rs_poll fix (a team's poll stops when the
# block's other team has given up): test_collective loopback (R = 2, 4, 8,
# every fault case) and single.
source scratch/dev_env.sh
B=scratch/bin
t coll-loop 240 $B/test_collective loopback
t coll-single 60 $B/test_collective single
t loom-rs1 30 $B/loom gemm-rs --gpus 1 --check-tokens 16 --iters 20 --tokens 4096 --hidden 1024 --ffn 4096
pack; cat $S
