#!/bin/bash
source scratch/dev_env.sh
# power and clocks of both GPUs every 100 ms while the large collective points run
t moe_1gpu 60 build/loom moe --gpus 1 --tokens 4096,8192,16384 --iters 20
t moe_2gpu 60 build/loom moe --gpus 2 --tokens 4096,8192,16384 --iters 20
nvidia-smi --query-gpu=index,timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 100 > $OUT/smi_llama.csv 2>&1 &
SMI=$!
L="--gpus 2 --check-tokens 16 --iters 20 --warmup 5"
t llama-ag 90 build/loom ag-gemm --tokens 2048,8192 --hidden 8192 --ffn 28672 $L
t llama-rs 90 build/loom gemm-rs --tokens 4096,16384 --hidden 8192 --ffn 28672 $L
t llama-rs-1gpu 90 build/loom gemm-rs --gpus 1 --tokens 16384 --hidden 8192 --ffn 14336 --check-tokens 16 --iters 20 --warmup 5
kill $SMI
t coll_loop 200 build/tests/test_collective loopback
t pytest 90 env PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1 LOOM_LIBRARY=$PWD/build/libloom.so LOOM_REFERENCE_LIBRARY=$PWD/build/python/libloom_ref.so python3 tests/python/run.py
for f in $OUT/moe_*.log $OUT/llama*.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s | ", $1, $2, $3}')"; done >> $S
python3 - "$OUT/smi_llama.csv" >> $S <<'PY'
import sys, collections
rows = [l.split(", ") for l in open(sys.argv[1]) if l.count(",") >= 6]
for gpu in sorted({r[0] for r in rows}):
    rs = [r for r in rows if r[0] == gpu]
    clk = sorted(int(r[2].split()[0]) for r in rs); pw = sorted(float(r[4].split()[0]) for r in rs)
    busy = [r for r in rs if float(r[4].split()[0]) > 400]
    reasons = collections.Counter(r[6].strip() for r in busy)
    bclk = sorted(int(r[2].split()[0]) for r in busy)
    print(f"gpu {gpu}: {len(rs)} samples; >400 W: {len(busy)}, sm clock median {bclk[len(bclk)//2] if bclk else '-'} min {bclk[0] if bclk else '-'} MHz; power max {pw[-1]} W; throttle reasons when busy {dict(reasons)}")
PY
pack; cat $S
