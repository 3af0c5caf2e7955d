#!/usr/bin/env bash
# Runs every GPU test binary in both launch modes and totals the results.
# Usage: tests/gpu/run.sh BUILD_TESTS_DIR
set -u
dir=${1:-build/tests}
export NCCL_NVLS_ENABLE=0
fail=0
pass=0
run() {
  echo "== $*"
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $*"; fi
}
run "$dir/test_exchange" single
run "$dir/test_exchange" multi
# MoE layer, one process: per world size the 144 small configs, the 8
# real-size cases (hidden up to 7168, ffn up to 2048, up to 16384 tokens on
# one rank, every row checked), determinism, graph and fault cases. One
# process per GPU: every 7th config and a different real case per world
# size (7 is coprime with the dtype and token periods), plus the rest.
run "$dir/test_moe" single
run "$dir/test_moe" multi --every 7
# Faults: bad routing, config mismatch, one call too many, another operator
# at the same call number (errors reach every rank within 100 ms,
# communicators still destroyed), the fused gate on NaN/Inf.
run "$dir/test_faults" single
run "$dir/test_faults" multi
# Reuse: a random sequence of exchanges and three MoE layers on one
# communicator, back to back, bitwise equal to the same calls in isolation.
run "$dir/test_sequence" single
run "$dir/test_sequence" multi
# Loopback worlds (loom_comm_create_loopback): 2, 4 and 8 ranks on device 0,
# so every multi-rank protocol runs even where one GPU is visible.
run "$dir/test_exchange" loopback
run "$dir/test_moe" loopback --every 7
run "$dir/test_faults" loopback
run "$dir/test_sequence" loopback
# Collective GEMMs (loom_ag_gemm): shapes off the tiles, bf16/fp16/TF32,
# activations, two calls back to back, a CUDA graph, a silent rank.
run "$dir/test_collective" single
run "$dir/test_collective" multi
run "$dir/test_collective" loopback
# Bulk-synchronous baseline (src/baseline) against the reference, with the
# expert GEMMs as a loop of cublasGemmEx and as grouped-batched calls.
run "$dir/test_baseline"
run env LOOM_BASELINE_GEMM=grouped "$dir/test_baseline"
echo "gpu-test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
