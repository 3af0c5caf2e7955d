# Session 34 call 4 (nvidia-h200-x2): B ahead of the readiness wait for the swapped tile (the
# weights into the ring's A slot and L2 while the rows / credits are on their way; until now
# the swapped tile ignored hop_params.b_ahead). test_collective multi on fresh binaries (its
# cases alternate LOOM_COLL_B_AHEAD=0/1), then the decode points at 2 GPUs, B ahead forced
# on (LOOM_COLL_B_AHEAD=1) beside the automatic choice (on only for the all-gather's one
# group of >= 128 rows, so off at all of these), two rounds.
source scratch/dev_env.sh
DEADLINE=${DEADLINE:-330}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t coll-multi 120 $B/test_collective multi
L="--gpus 2 --check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 14336"
for r in 1 2; do
  for x in "ag-gemm 2" "ag-gemm 8" "gemm-rs 16" "gemm-ar 16"; do
    set -- $x
    t $1$2-auto-$r 40 $B/loom $1 --impl both $L --tokens $2
    LOOM_COLL_B_AHEAD=1 t $1$2-bah-$r 40 $B/loom $1 --impl fused $L --tokens $2
  done
done
grep -h "cases (three\|R=.*done" $OUT/logs/coll-*.log >> $S
for f in $OUT/logs/*-[12].log; do echo "$(basename $f .log): $(grep -E '(fused|baseline) +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/;s/.*baseline *median \([0-9.]*\) us.*/base \1/' | cut -c1-90 | tr '\n' ' ')"; done >> $S
pack; cat $S
