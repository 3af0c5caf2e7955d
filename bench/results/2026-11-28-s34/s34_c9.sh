# Session 34 call 9 (nvidia-h200): the ring waits with a suspend-time hint (mbarrier.try_wait
# ... 2000 ns; gemm_h2k, built with -DHOP_WAIT_HINT_NS=2000) beside the plain probe (gemm_h0),
# same tree: after (g)'s 4x issue rate. Checks of the hinted build (dec2, w1 small), then
# decode / small-M / grouped 4 x 8192 timings, two rounds interleaved.
source scratch/dev_env.sh
DEADLINE=${DEADLINE:-120}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t check 25 $B/gemm_h2k --check-only --variant dec2
grep -h "all results match\|bad)" $OUT/logs/check.log | grep -v " 0 bad" | head -5 >> $S
for r in 1 2; do
  for h in h0 h2k; do
    t dec-$h-$r 12 $B/gemm_$h --dtype bf16 --shape decode --variant dec2 --iters 20
    t sm-$h-$r 8 $B/gemm_$h --dtype bf16 --shape smallm --variant w1,dec2 --iters 20
    t gr-$h-$r 12 $B/gemm_$h --dtype bf16 --shape grouped --variant w1 --iters 20 --case "4x8192 x2048x2048"
  done
done
pack; cat $S
