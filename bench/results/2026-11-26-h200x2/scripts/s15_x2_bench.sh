#!/bin/bash
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/smi.txt 2>&1
M="build/loom moe --gpus 2"
t moe_grid 120 $M --tokens 4096,8192,16384 --iters 20 --json $OUT/moe_grid.json
t moe_qwen 90 $M --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20 --json $OUT/moe_qwen.json
t moe_decode 90 $M --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50 --json $OUT/moe_decode.json
t moe_fp32 60 $M --tokens 16384 --dtype fp32 --iters 10 --json $OUT/moe_fp32.json
L="--gpus 2 --check-tokens 16 --iters 20 --warmup 5"
for m in 4096 8192 16384; do
  t mk-rs-$m 40 build/loom gemm-rs --tokens $m --hidden $((m / 16)) --ffn $m $L --json $OUT/mk-rs-$m.json
  t mk-ar-$m 40 build/loom gemm-ar --tokens $m --hidden $((m / 16)) --ffn $m $L --json $OUT/mk-ar-$m.json
  t mk-ag-$m 40 build/loom ag-gemm --tokens $((m / 2)) --hidden $m --ffn $((m / 8)) $L --json $OUT/mk-ag-$m.json
done
t llama-ag 90 build/loom ag-gemm --tokens 2048,8192 --hidden 8192 --ffn 28672 $L --json $OUT/llama-ag.json
t llama-rs 90 build/loom gemm-rs --tokens 4096,16384 --hidden 8192 --ffn 28672 $L --json $OUT/llama-rs.json
t llama-ar 90 build/loom gemm-ar --tokens 4096,16384 --hidden 8192 --ffn 28672 $L --json $OUT/llama-ar.json
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv >> $OUT/smi.txt 2>&1
pack; cat $S
