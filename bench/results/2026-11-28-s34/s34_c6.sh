# Session 34 call 6 (nvidia-h200): hop_dec2 with 12 stages (gemm12: 192 KB of weights in flight,
# a build of this tree with the one template argument changed; not landed) beside the landed 11
# (gemm11), decode and small-M shapes, bf16, two rounds interleaved.
source scratch/dev_env.sh
DEADLINE=${DEADLINE:-200}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
for r in 1 2; do
  for s in 11 12; do
    t dec$s-$r 40 $B/gemm$s --dtype bf16 --shape decode --variant dec2 --iters 20
    t sm$s-$r 20 $B/gemm$s --dtype bf16 --shape smallm --variant dec2 --iters 20
  done
done
for f in $OUT/logs/*.log; do echo "$(basename $f .log): $(grep -o 'clean-flush *[0-9.]* ms\|back-to-back x20 *[0-9.]* ms' $f | awk '{print $(NF-1)}' | tr '\n' ' ')"; done >> $S
pack; cat $S
