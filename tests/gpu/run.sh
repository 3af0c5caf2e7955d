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
# MoE layer: all 144 configs per world size in one process; one process per
# GPU runs every 7th config (7 is coprime with the dtype and token periods,
# so the subset still mixes them) plus determinism, graph and fault cases.
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
# Bulk-synchronous baseline (src/baseline) against the reference, with the
# expert GEMMs as a loop of cublasGemmEx and as grouped-batched calls.
run "$dir/test_baseline"
run env LOOM_BASELINE_GEMM=grouped "$dir/test_baseline"
echo "gpu-test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
