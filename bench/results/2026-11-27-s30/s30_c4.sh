#!/bin/bash
# session 30, call 4 (1 GPU): the window's new tagged-store region moves every operator's data
# region by 4 MiB (2+ ranks) and loom_dev_comm grew by 16 bytes: the MoE layer, the exchange, the
# fault cases and the sequences on one GPU and its loopback worlds (4a4ff28's library).
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t exch-single 60 $B/test_exchange single
t exch-loop 60 $B/test_exchange loopback
t moe-loop 240 $B/test_moe loopback --every 7
t faults-loop 120 $B/test_faults loopback
t seq-single 60 $B/test_sequence single
t moe-single 150 $B/test_moe single
t faults-single 60 $B/test_faults single
pack; cat $S
