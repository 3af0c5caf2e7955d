#!/bin/bash
# session 31, call 6 (1 GPU): before moving the MoE expert GEMMs to ping-pong consumers (docs/moe_v2.md,
# "Next: overlap the GEMM0 epilogue"), the engine's ping-pong 128 x 128 tile against the cooperative
# 128 x 256 one (w1) on the grouped shapes, the MoE's T = 16384 expert GEMM (32 x 1024 x 2048 x 2048)
# among them, beside cuBLAS (bench/gemm checks every case against the CPU first).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $OUT/gpu.txt
mkdir -p $OUT/logs
timeout 300 scratch/bin2/gemm --dtype bf16 --shape grouped --variant w1,pp --k 2048 --iters 20 > $OUT/logs/grouped.log 2>&1
echo "rc=$?" >> $OUT/logs/grouped.log
grep -vE "^\s*$" $OUT/logs/grouped.log | tail -40
