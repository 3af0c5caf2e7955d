#!/bin/bash
# session 29, call 5 (asked for one H200): issue 10's engine grid on the machine its targets name, the
# engine at 1a21a91 (build/bench/gemm beside cuBLAS; every case checked against the CPU reference
# before timing), and the plain stream probe (how fast one launch can read the small-M weights at all).
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total,power.limit --format=csv > $OUT/gpu.txt 2>&1
t bf16-dense 150 build/bench/gemm --dtype bf16 --shape dense --variant w1,pp --iters 10
t bf16-grouped 200 build/bench/gemm --dtype bf16 --shape grouped --variant w1,pp --iters 10
t bf16-smallm 120 build/bench/gemm --dtype bf16 --shape smallm --iters 10
t fp16-grouped 150 build/bench/gemm --dtype fp16 --shape grouped --variant w1,pp --iters 10 --quick
t tf32-dense 150 build/bench/gemm --dtype tf32 --shape dense --variant v1,w1 --iters 10
t tf32-grouped 150 build/bench/gemm --dtype tf32 --shape grouped --variant v1,w1 --iters 10 --quick
t stream 60 build/bench/probe_stream
pack; cat $S
