#!/bin/bash
# session 16, first 4-GPU call: issue 11 points, issue 12 grid, extras, multi-GPU tests
source scratch/dev_env.sh
N=$(nvidia-smi -L | wc -l)
nvidia-smi > $OUT/smi.txt 2>&1
nvidia-smi topo -m >> $OUT/smi.txt 2>&1
B=$OUT
OUT=$B/moe DEADLINE=110 bash bench/lease.sh moe $N > $B/moe_lease.txt 2>&1
OUT=$B/coll DEADLINE=150 bash bench/lease.sh coll $N > $B/coll_lease.txt 2>&1
OUT=$B/tests DEADLINE=220 bash bench/lease.sh tests $N > $B/tests_lease.txt 2>&1
OUT=$B/x
mkdir -p $OUT
S=$OUT/summary.txt
t moe-trace 40 build/loom moe --gpus $N --tokens 16384 --iters 5 --trace $OUT/trace16k.json
t moe-threads 30 build/loom moe --gpus $N --tokens 4096 --iters 20 --launch threads
t moe-dec-threads 30 build/loom moe --gpus $N --tokens 128 --experts 64 --topk 8 --iters 50 --launch threads
gzip $OUT/*.json 2>/dev/null
pack

cat $B/*/summary.txt > $B/summary_all.txt
(cd $B && tar cf all.tar --exclude=all.tar --exclude=summary_all.txt ./* && find . -mindepth 1 -maxdepth 1 ! -name all.tar ! -name summary_all.txt -exec rm -rf {} +)
cat $B/summary_all.txt
