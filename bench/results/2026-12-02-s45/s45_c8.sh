# NOTE (call 10): the loom_p* binaries this call ran were mislinked (HEAD's moe.o stayed in
# libloom.a); they were HEAD. See bench/RESULTS.md session 45 (c).
# Session 45 call 8 (nvidia-h200): more on ReLU against SiLU (RESULTS session 45 (i)): GeLU in
# the build without any 16-bit epilogue (loom_p3, probe harness) against HEAD (loom_e), and
# the in-binary NCCL + cuBLAS baseline with each activation (its GEMM1 reads h as computed).
DEADLINE=200
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
export LOOM_PROBE_NOVERIFY=1
: > $S
B=scratch/bin
for r in 1 2; do
  for a in relu silu gelu; do
    for v in e p3; do t $a-$v-$r 20 $B/loom_$v moe --gpus 1 --impl fused --tokens 16384 --iters 10 --check-tokens 4 --act $a; done
    t $a-base-$r 30 $B/loom_e moe --gpus 1 --impl baseline --tokens 16384 --iters 10 --check-tokens 4 --act $a
  done
done
for f in $OUT/*-base-*; do echo "$(basename $f .log): $(grep -E 'baseline +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
