#!/usr/bin/env bash
# One device call's worth of multi-GPU work, for a lease of N GPUs (the
# `run` tool of the device library: at most 10 minutes a call, at most 8
# files come back). Every command runs under its own timeout and a deadline
# for the whole call; each writes OUT/NAME.log and a line to OUT/summary.txt
# (name, exit status, seconds, the log's last line); at the end every log
# goes into OUT/logs.tgz and only that and summary.txt stay.
#
#   bench/lease.sh tests N   the multi-GPU tests (collective GEMMs, MoE every
#                            7th config, sequence, faults, exchange), with
#                            test_collective loopback on the last GPU beside
#                            them, then torchrun of tests/python/dist_moe.py
#                            on N ranks (and on 2 where N > 2) and
#                            tests/python/run.py
#   bench/lease.sh moe N     issue 11's points: E=32 k=2 H=F=2048 bf16 at
#                            T = 4096, 8192, 16384 per GPU; fp32 at 16384;
#                            the Qwen3-30B-A3B shape at 8192; decode E=64
#                            k=8 at T = 1, 16, 128, 512; T = 8192 on 2 GPUs
#                            (weak scaling)
#   bench/lease.sh coll N    issue 12's points: bench/collective_grid.sh
#                            (Llama and mKernel shapes, the floor points),
#                            then the floor and the M = 4096 mKernel points
#                            again with --launch serial (the default is
#                            threads since session 16)
#
# Needs build/loom and build/tests/* (built there, or built elsewhere and
# carried: then the nvidia-nccl wheel's lib directory must be on the
# library path, which this script adds when the wheel is importable).
# OUT defaults to ./lease-out. DEADLINE (seconds, default 560) bounds the
# call; commands that would start past it are listed as skipped.
set -u
what=${1:?usage: bench/lease.sh tests|moe|coll N}
n=${2:?usage: bench/lease.sh tests|moe|coll N}
OUT=${OUT:-lease-out}
DEADLINE=${DEADLINE:-560}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 # loom never uses NVLink multicast
nccl_lib=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])' 2>/dev/null)
[ -n "$nccl_lib" ] && export LD_LIBRARY_PATH="$nccl_lib/lib:${LD_LIBRARY_PATH:-}"
S=$OUT/summary.txt
: >"$S"

# t NAME TIMEOUT CMD...: run CMD if the deadline leaves 20 s, into OUT/NAME.log
t() {
  local name=$1 tmo=$2
  shift 2
  local left=$((DEADLINE - SECONDS))
  if [ $left -lt 20 ]; then
    echo "$name skipped (deadline)" >>"$S"
    return
  fi
  [ "$tmo" -gt $left ] && tmo=$left
  local start=$SECONDS
  echo "== $*" >"$OUT/$name.log"
  timeout "$tmo" stdbuf -oL "$@" >>"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - start))s | $(tail -1 "$OUT/$name.log" | cut -c1-160)" >>"$S"
}

L="./build/loom"
case $what in
tests)
  nvidia-smi >"$OUT/smi.txt" 2>&1
  # the loopback worlds (2, 4, 8 ranks on one GPU) on the last GPU, beside
  # the multi-GPU tests: neither is timed (session 16 ran them so)
  (
    s=$SECONDS
    CUDA_VISIBLE_DEVICES=$((n - 1)) timeout 240 ./build/tests/test_collective loopback >"$OUT/coll-loop.log" 2>&1
    echo "coll-loop rc=$? $((SECONDS - s))s | $(tail -1 "$OUT/coll-loop.log" | cut -c1-160)" >"$OUT/loop_rc.txt"
  ) &
  loop=$!
  t coll-multi 200 ./build/tests/test_collective multi
  t moe-multi 200 ./build/tests/test_moe multi --every 7
  t seq-multi 90 ./build/tests/test_sequence multi
  t faults-multi 90 ./build/tests/test_faults multi
  t exchange-multi 60 ./build/tests/test_exchange multi
  t dist-moe 150 env PYTHONPATH=python LOOM_LIBRARY="$PWD/build/libloom.so" \
    torchrun --nproc-per-node "$n" tests/python/dist_moe.py
  [ "$n" -gt 2 ] && t dist-moe-2 150 env PYTHONPATH=python LOOM_LIBRARY="$PWD/build/libloom.so" \
    torchrun --nproc-per-node 2 tests/python/dist_moe.py
  wait $loop
  cat "$OUT/loop_rc.txt" >>"$S" && rm -f "$OUT/loop_rc.txt"
  t pytest 120 env PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1 LOOM_LIBRARY="$PWD/build/libloom.so" \
    LOOM_REFERENCE_LIBRARY="$PWD/build/python/libloom_ref.so" python3 tests/python/run.py
  ;;
moe)
  M="$L moe --gpus $n"
  t moe-grid 150 $M --tokens 4096,8192,16384 --iters 20 --json "$OUT/moe-grid.json"
  t moe-qwen3 90 $M --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20 \
    --json "$OUT/moe-qwen3.json"
  t moe-decode 90 $M --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50 --json "$OUT/moe-decode.json"
  t moe-fp32 60 $M --tokens 16384 --dtype fp32 --iters 10 --json "$OUT/moe-fp32.json"
  t moe-scale-2 60 $L moe --gpus 2 --tokens 8192 --iters 20 --json "$OUT/moe-scale-2.json"
  ;;
coll)
  t grid 420 bash bench/collective_grid.sh "$OUT/grid" "$n"
  C="--gpus $n --check-tokens 16 --iters 100 --launch serial"
  for op in ag-gemm gemm-rs gemm-ar; do
    rows=256
    [ $op = ag-gemm ] && rows=$((256 / n))
    t "floor-$op-serial" 30 $L $op $C --tokens $rows --hidden 128 --ffn 256
  done
  t mk-rs-4096-serial 40 $L gemm-rs $C --tokens 4096 --hidden 256 --ffn 4096
  t mk-ar-4096-serial 40 $L gemm-ar $C --tokens 4096 --hidden 256 --ffn 4096
  ;;
*)
  echo "bench/lease.sh: unknown '$what' (tests, moe or coll)" >&2
  exit 2
  ;;
esac

# the table rows of every loom run, one line each, into the summary
find "$OUT" -name '*.log' | sort | while read -r f; do
  rows=$(grep -E '^ +[0-9]+ (fused|baseline) ' "$f" | awk '{printf "%s %s %s | ", $1, $2, $3}')
  [ -n "$rows" ] && echo "$(basename "$f" .log): $rows" >>"$S"
done
(cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt ./* &&
  find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +)
cat "$S"
! grep -q " rc=[1-9]" "$S"
