# Session 34 call 5 (nvidia-h200-x2): the other GPU tests on this tree's binaries (the engine's
# shared code changed under the MoE kernel: hop_cfg, barrier numbers): test_moe, test_faults,
# test_sequence multi; then the decode points with the blocks in index order
# (LOOM_COLL_SPREAD=0) beside the automatic one-task-per-TPC order, one round.
source scratch/dev_env.sh
DEADLINE=${DEADLINE:-300}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t moe-multi 130 $B/test_moe multi
t faults-multi 30 $B/test_faults multi
t seq-multi 50 $B/test_sequence multi
L="--gpus 2 --check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 14336"
for x in "gemm-rs 16" "ag-gemm 2"; do
  set -- $x
  t $1$2-auto-1 30 $B/loom $1 --impl fused $L --tokens $2
  LOOM_COLL_SPREAD=0 t $1$2-idx-1 30 $B/loom $1 --impl fused $L --tokens $2
done
for f in $OUT/logs/*-[12].log; do echo "$(basename $f .log): $(grep -E '(fused|baseline) +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/;s/.*baseline *median \([0-9.]*\) us.*/base \1/' | cut -c1-90 | tr '\n' ' ')"; done >> $S
pack; cat $S
