#!/usr/bin/env bash
# The benchmark grid of bench/RESULTS.md with `loom moe` (fused beside the
# NCCL + cuBLAS baseline, both verified first), one JSON + log per run:
#   grid-bf16, grid-fp32   FlashDMoE's grid: E=32, k=2, H=F=2048,
#                          T in {4096, 8192, 16384} per GPU, on N GPUs
#   scale-2                weak scaling: the same at T=8192 on 2 GPUs
#                          (FlashDMoE's overlap efficiency T(2)/T(N))
#   decode                 T=128, E=64, k=8, bf16, 200 iterations
#   gemm-grouped           the baseline with grouped-batched expert GEMMs
#                          at T=8192 (the loop is the default)
#   flush                  T=8192 bf16 with the L2 flushed every iteration
#   experts-E (with "experts" as 3rd argument) E in {8, 16, 32, 64, 128} at
#                          T=16384, bf16 (issue 5's expert scaling on 8 GPUs)
# Usage: bench/moe_grid.sh OUTDIR [N] [experts]   (N: GPUs, default all visible)
set -u
out=${1:?usage: bench/moe_grid.sh OUTDIR [N]}
n=${2:-0}
sweep=${3:-}
export NCCL_NVLS_ENABLE=0
mkdir -p "$out"
fail=0
run() {
  local name=$1
  shift
  echo "== ./build/loom moe $* --json $out/$name.json"
  timeout 300 stdbuf -oL ./build/loom moe "$@" --json "$out/$name.json" >"$out/$name.log" 2>&1
  local rc=$?
  cat "$out/$name.log"
  [ $rc -eq 0 ] || { echo "FAILED ($rc): $name"; fail=$((fail + 1)); }
}
run grid-bf16 --gpus "$n" --dtype bf16 --tokens 4096,8192,16384
run grid-fp32 --gpus "$n" --dtype fp32 --tokens 4096,8192,16384
run scale-2-bf16 --gpus 2 --dtype bf16 --tokens 8192
run scale-2-fp32 --gpus 2 --dtype fp32 --tokens 8192
run decode --gpus "$n" --dtype bf16 --tokens 128 --experts 64 --topk 8 --iters 200 --warmup 20
export LOOM_BASELINE_GEMM=grouped
run gemm-grouped --gpus "$n" --impl baseline --tokens 8192
unset LOOM_BASELINE_GEMM
run flush --gpus "$n" --dtype bf16 --tokens 8192 --flush-l2 1
if [ "$sweep" = experts ]; then
  for e in 8 16 32 64 128; do
    run "experts-$e" --gpus "$n" --dtype bf16 --tokens 16384 --experts "$e"
  done
fi
echo "moe-grid: $fail failed"
[ $fail -eq 0 ]
