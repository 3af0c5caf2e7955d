# Session 33 call 4 (nvidia-h200): the host groups' table in shared memory with the readiness
# fields and maps prefetched (hg_table; B-first dropped): on / off A/B in one binary,
# alternating, three rounds; the stamped probe build; the w1 checks.
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
for r in 1 2 3; do
  t sm_on_$r 60 $B/gemm --dtype bf16 --shape smallm --variant w1 --iters 20
  t sm_off_$r 60 $B/gemm --dtype bf16 --shape smallm --variant w1 --iters 20 --hg-table off
done
t dec_on 90 $B/gemm --dtype bf16 --shape decode --variant w1 --iters 20
t dec_off 90 $B/gemm --dtype bf16 --shape decode --variant w1 --iters 20 --hg-table off
t gr_on 120 $B/gemm --dtype bf16 --shape grouped --k 2048 --variant w1 --iters 10
t gr_off 120 $B/gemm --dtype bf16 --shape grouped --k 2048 --variant w1 --iters 10 --hg-table off
t probe_sm 60 $B/gemm_probe --dtype bf16 --shape smallm --variant w1 --iters 20
t check_w1 200 $B/gemm --check-only --variant w1,v1
grep -h "all results match\|bad)" $OUT/logs/check_w1.log | grep -v " 0 bad" | head -5 >> $S
pack
