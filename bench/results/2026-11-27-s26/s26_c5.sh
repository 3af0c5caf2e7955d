#!/bin/bash
# session 26, call 5 (4 GPUs): B ahead of the readiness waits (hop_b_ahead; the all-gather's one group,
# the reduce-scatter's / all-reduce's one tile, whose credit waits are now the engine's readiness):
# the multi-GPU tests, then LOOM_COLL_B_AHEAD=0 against the default, alternating, then issue 12's grid
source scratch/dev_env.sh
B=scratch/bin
mkdir -p build && cp $B/loom build/loom
t coll-multi 240 $B/test_collective multi
t faults-multi 60 $B/test_faults multi
t seq-multi 60 $B/test_sequence multi
L="--check-tokens 16 --iters 40 --warmup 10 --hidden 8192 --ffn 28672"
f() { local n=$1 env=$2; shift 2; t $n 40 env $env "$@"; }
for r in 1 2; do
  for ba in 1 0; do
    E=LOOM_COLL_B_AHEAD=$ba; [ $ba = 1 ] && E=X=1; I=fused; [ $r$ba = 11 ] && I=both
    for tok in 16 128; do
      f ag-t$tok-b$ba-$r $E $B/loom ag-gemm --gpus 4 --impl $I $L --tokens $(( tok / 4 ))
      f rs-t$tok-b$ba-$r $E $B/loom gemm-rs --gpus 4 --impl $I $L --tokens $tok
      f ar-t$tok-b$ba-$r $E $B/loom gemm-ar --gpus 4 --impl $I $L --tokens $tok
    done
    f ag-t256-b$ba-$r $E $B/loom ag-gemm --gpus 4 --impl $I $L --tokens 64
    f ag-t512-b$ba-$r $E $B/loom ag-gemm --gpus 4 --impl $I $L --tokens 128
    f flrs-b$ba-$r $E $B/loom gemm-rs --gpus 4 --impl $I --tokens 256 --hidden 128 --ffn 256 --check-tokens 16 --iters 100 --warmup 10
  done
done
for f in $OUT/logs/*-b[01]-[12].log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
t grid 280 bash bench/collective_grid.sh $OUT/grid 4
(cd $OUT && tar czf grid.tgz grid && rm -rf grid)
pack; cat $S
