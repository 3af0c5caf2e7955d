#!/bin/bash
# session 26, call 4 (4 GPUs): the blocks' first tasks one per TPC (hop_block_slot, LOOM_COLL_SPREAD):
# GPU tests (loopback beside them on GPU 3), then the spread against index order, alternating,
# at the points whose tasks are fewer than the SMs (decode, 256-512 tokens, mKernel 4096 / 8192, floors)
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
( export CUDA_VISIBLE_DEVICES=3
  timeout 330 $B/test_collective loopback > $OUT/logs/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(grep -c FAIL $OUT/logs/coll-loop.log) FAIL lines | $(tail -1 $OUT/logs/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 240 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
wait $LP; cat $OUT/loop_rc.txt >> $S
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
M="--check-tokens 16 --iters 40 --warmup 10"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
for r in 1 2; do
  for sp in 1 0; do
    E=LOOM_COLL_SPREAD=$sp; I=fused; [ $r$sp = 11 ] && I=both
    for tok in 16 128; do
      f ag-t$tok-s$sp-$r $E $B/loom ag-gemm --gpus 4 --impl $I $L --tokens $(( tok / 4 ))
      f rs-t$tok-s$sp-$r $E $B/loom gemm-rs --gpus 4 --impl $I $L --tokens $tok
      f ar-t$tok-s$sp-$r $E $B/loom gemm-ar --gpus 4 --impl $I $L --tokens $tok
    done
    f ag-t512-s$sp-$r $E $B/loom ag-gemm --gpus 4 --impl $I $L --tokens 128
    f rs-t256-s$sp-$r $E $B/loom gemm-rs --gpus 4 --impl $I $L --tokens 256
    f ar-t256-s$sp-$r $E $B/loom gemm-ar --gpus 4 --impl $I $L --tokens 256
    f mkag4k-s$sp-$r $E $B/loom ag-gemm --gpus 4 --impl $I --tokens 1024 --hidden 4096 --ffn 1024 $M
    f mkrs4k-s$sp-$r $E $B/loom gemm-rs --gpus 4 --impl $I --tokens 4096 --hidden 256 --ffn 4096 $M
    f mkar4k-s$sp-$r $E $B/loom gemm-ar --gpus 4 --impl $I --tokens 4096 --hidden 256 --ffn 4096 $M
    f mkrs8k-s$sp-$r $E $B/loom gemm-rs --gpus 4 --impl $I --tokens 8192 --hidden 512 --ffn 8192 $M
    f mkar8k-s$sp-$r $E $B/loom gemm-ar --gpus 4 --impl $I --tokens 8192 --hidden 512 --ffn 8192 $M
    f flar-s$sp-$r $E $B/loom gemm-ar --gpus 4 --impl $I --tokens 256 --hidden 128 --ffn 256 --check-tokens 16 --iters 100 --warmup 10
  done
done
for f in $OUT/logs/*-s[01]-[12].log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
pack; cat $S
