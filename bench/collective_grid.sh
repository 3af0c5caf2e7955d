#!/usr/bin/env bash
# Issue 12's grid for the collective GEMMs with `loom ag-gemm`, `loom
# gemm-rs` and `loom gemm-ar` (fused beside the NCCL + cuBLAS baseline, both
# verified first), one JSON + log per run, for bench/plot_collective.py and
# bench/RESULTS.md:
#   llama-ag-bf16   all-gather + GEMM, the column-parallel MLP input of a
#                   Llama-70B-class layer: M tokens in total (M / N rows per
#                   GPU), hidden 8192 = K, ffn 28672 split over the GPUs
#   llama-rs-bf16   GEMM + reduce-scatter, its row-parallel output: every
#                   GPU's M rows of ffn / N, hidden 8192 = N, M / N rows each
#   llama-ar-bf16   GEMM + all-reduce, the same shapes as llama-rs, every GPU
#                   keeping all M rows
#   mk-ag-M, mk-rs-M, mk-ar-M  mKernel's grid: M = K in {4096, 8192, 16384},
#                   N = M / 16 output columns per GPU (all-gather: M / N rows
#                   per GPU, --ffn = N x M / 16; reduce-scatter and
#                   all-reduce: M rows, K split)
#   llama-*-fp32    the Llama points on TF32
#   floor-ag, floor-rs, floor-ar  a tiny shape (256 rows in all, hidden 128,
#                   ffn 256): what every call pays regardless of size (launch,
#                   credit waits, flag polls, handshakes; session 15 put the
#                   M = 4096 mKernel points' gap to the baseline there)
# M in {4096, 16384} for the Llama points (issue 12).
# Usage: bench/collective_grid.sh OUTDIR N   (N: GPUs, 1, 2, 4 or 8)
set -u
out=${1:?usage: bench/collective_grid.sh OUTDIR N}
n=${2:?usage: bench/collective_grid.sh OUTDIR N}
export NCCL_NVLS_ENABLE=0
mkdir -p "$out"
fail=0
run() {
  local op=$1 name=$2
  shift 2
  echo "== ./build/loom $op $* --json $out/$name.json"
  timeout 300 stdbuf -oL ./build/loom "$op" --gpus "$n" "$@" --json "$out/$name.json" >"$out/$name.log" 2>&1
  local rc=$?
  cat "$out/$name.log"
  [ $rc -eq 0 ] || { echo "FAILED ($rc): $name"; fail=$((fail + 1)); }
}
L="--check-tokens 16 --iters 20 --warmup 5"
for dt in bf16 fp32; do
  run ag-gemm "llama-ag-$dt" --dtype $dt --tokens $((4096 / n)),$((16384 / n)) --hidden 8192 --ffn 28672 $L
  run gemm-rs "llama-rs-$dt" --dtype $dt --tokens 4096,16384 --hidden 8192 --ffn 28672 $L
  run gemm-ar "llama-ar-$dt" --dtype $dt --tokens 4096,16384 --hidden 8192 --ffn 28672 $L
done
for m in 4096 8192 16384; do
  run ag-gemm "mk-ag-$m" --tokens $((m / n)) --hidden $m --ffn $((n * m / 16)) $L
  run gemm-rs "mk-rs-$m" --tokens $m --hidden $((m / 16)) --ffn $m $L
  run gemm-ar "mk-ar-$m" --tokens $m --hidden $((m / 16)) --ffn $m $L
done
F="--check-tokens 16 --iters 100 --warmup 10"
run ag-gemm floor-ag --tokens $((256 / n)) --hidden 128 --ffn 256 $F
run gemm-rs floor-rs --tokens 256 --hidden 128 --ffn 256 $F
run gemm-ar floor-ar --tokens 256 --hidden 128 --ffn 256 $F
echo "collective-grid: $fail failed"
[ $fail -eq 0 ]
