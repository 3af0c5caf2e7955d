# Session 34 call 2 (nvidia-h200-x2): the collectives with the swapped decode tile on 2 GPUs:
# test_collective multi (its {13, ..} shape: sources / owners of 13 rows, the all-reduce's
# one-shot group of 13 with tagged stores and replicas) and single, test_faults multi, then the
# decode points at 2 GPUs (Llama-70B-class, ffn 14336 = the 4-GPU shard's k of 7168 rows),
# the swapped tile (automatic) beside the 64 x 128 one (LOOM_AG_TILE=dec64), two rounds.
source scratch/dev_env.sh
DEADLINE=${DEADLINE:-560}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t coll-multi 170 $B/test_collective multi
t faults-multi 30 $B/test_faults multi
L="--gpus 2 --check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 14336"
for r in 1 2; do
  for tok in 2 8 16; do
    for op in gemm-rs gemm-ar ag-gemm; do
      t $op$tok-sw-$r 40 $B/loom $op --impl both $L --tokens $tok
      LOOM_AG_TILE=dec64 t $op$tok-64-$r 40 $B/loom $op --impl fused $L --tokens $tok
    done
  done
done
t coll-single 120 $B/test_collective single
for f in $OUT/logs/*-[12].log; do echo "$(basename $f .log): $(grep -E '(fused|baseline) +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/;s/.*baseline *median \([0-9.]*\) us.*/base \1/' | cut -c1-90 | tr '\n' ' ')"; done >> $S
pack; cat $S
