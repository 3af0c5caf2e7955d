# Session 33 call 3 (nvidia-h200): the group table in shared memory (hg_table) and B before the
# first readiness wait (b_first): every check, then on / off A/B in one binary, alternating;
# the stamped probe build of the same tree.
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
OFF="--hg-table off --b-first off"
t check 240 $B/gemm --check-only
for r in 1 2; do
  t sm_on_$r 60 $B/gemm --dtype bf16 --shape smallm --variant w1 --iters 20
  t sm_off_$r 60 $B/gemm --dtype bf16 --shape smallm --variant w1 --iters 20 $OFF
  t sm_tonly_$r 60 $B/gemm --dtype bf16 --shape smallm --variant w1 --iters 20 --b-first off
done
t dec_on 90 $B/gemm --dtype bf16 --shape decode --variant w1 --iters 20
t dec_off 90 $B/gemm --dtype bf16 --shape decode --variant w1 --iters 20 $OFF
t gr_on 120 $B/gemm --dtype bf16 --shape grouped --k 2048 --variant w1 --iters 10
t gr_off 120 $B/gemm --dtype bf16 --shape grouped --k 2048 --variant w1 --iters 10 $OFF
t dense_on 60 $B/gemm --dtype bf16 --shape dense --variant w1 --iters 10
t dense_off 60 $B/gemm --dtype bf16 --shape dense --variant w1 --iters 10 $OFF
t probe_sm 60 $B/gemm_probe --dtype bf16 --shape smallm --variant w1 --iters 20
grep -h "all results match\|mismatch\|FAIL" $OUT/logs/check.log | head -5 >> $S
pack
