#!/bin/bash
source scratch/dev_env.sh
nvidia-smi > $OUT/smi.txt 2>&1; nvidia-smi topo -m >> $OUT/smi.txt 2>&1
t coll_multi 200 build/tests/test_collective multi
t dist_moe2 150 env PYTHONPATH=python LOOM_LIBRARY=$PWD/build/libloom.so torchrun --nproc-per-node 2 tests/python/dist_moe.py
t moe_multi 240 build/tests/test_moe multi --every 7
t seq_multi 90 build/tests/test_sequence multi
t faults_multi 60 build/tests/test_faults multi
t exch_multi 40 build/tests/test_exchange multi
pack; cat $S
