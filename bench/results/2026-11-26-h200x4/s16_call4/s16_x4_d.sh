#!/bin/bash
# session 16, call 4 (4 GPUs): the final tree. Issue 12's grid (bench/lease.sh
# coll: collective_grid.sh + the --launch serial points), the MoE grid and
# decode again (threads default now), the Python tests (two-GPU ones included).
source scratch/dev_env.sh
N=$(nvidia-smi -L | wc -l)
B=$OUT
OUT=$B/coll DEADLINE=230 bash bench/lease.sh coll $N > $B/coll_lease.txt 2>&1
OUT=$B/x; mkdir -p $OUT; S=$OUT/summary.txt
t moe-grid 60 build/loom moe --gpus $N --tokens 4096,8192,16384 --iters 20 --json $OUT/moe-grid.json
t moe-decode 60 build/loom moe --gpus $N --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50 --json $OUT/moe-decode.json
t pytest 150 env PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1 LOOM_LIBRARY=$PWD/build/libloom.so LOOM_REFERENCE_LIBRARY=$PWD/build/python/libloom_ref.so python3 tests/python/run.py
for f in $OUT/moe-*.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s | ", $1, $2, $3}')"; done >> $S
gzip $OUT/*.json
pack
cat $B/coll/summary.txt $B/x/summary.txt > $B/summary_all.txt
(cd $B && tar cf all.tar --exclude=all.tar --exclude=summary_all.txt ./* && find . -mindepth 1 -maxdepth 1 ! -name all.tar ! -name summary_all.txt -exec rm -rf {} +)
cat $B/summary_all.txt
