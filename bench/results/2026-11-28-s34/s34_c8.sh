# Session 34 call 8 (nvidia-h200): hop_dec64 (64 weight rows x 16 group rows, one consumer WG
# doing m64n16: 128 CTAs at N = 8192, as cuBLAS's 64 x 16 kernel) beside hop_dec2: every
# small-config check of dec64, then the decode and small-M timings of both, two rounds.
source scratch/dev_env.sh
DEADLINE=${DEADLINE:-150}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t check 60 $B/gemm --check-only --variant dec64
grep -h "all results match\|bad)" $OUT/logs/check.log | grep -v " 0 bad" | head -10 >> $S
for r in 1 2; do
  t dec-$r 30 $B/gemm --dtype bf16 --shape decode --variant dec2,dec64 --iters 20
  t sm-$r 15 $B/gemm --dtype bf16 --shape smallm --variant dec2,dec64 --iters 20
done
for f in $OUT/logs/dec-*.log $OUT/logs/sm-*.log; do echo "$(basename $f .log): $(grep -o 'clean-flush *[0-9.]* ms\|back-to-back x20 *[0-9.]* ms\|cuBLAS *[0-9.]* ms)' $f | awk '{print $(NF-1)}' | tr '\n' ' ')"; done >> $S
pack; cat $S
