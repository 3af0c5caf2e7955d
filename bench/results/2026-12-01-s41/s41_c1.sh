# Session 41 call 1 (nvidia-h200): the swapped decode tile with split-K (hop_splitk_finish_swap,
# bench variants dec2+sk2 / dec2+sk4) against dec2 and against HEAD's dec2 (9582141 + the python
# commit; gemm_head). Checks of every small-config case first, then decode and small-M timings,
# alternating binaries. Binaries built here (make build/bench/gemm) and carried in scratch/carry.tar.xz.
DEADLINE=560
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader >> $S
B=scratch/bin
t check 230 $B/gemm --check-only --variant dec2,dec2+sk2,dec2+sk4
grep -h "all results match\|FAIL" $OUT/check.log | head -20 >> $S
for r in 1 2; do
  t dec_new$r 60 $B/gemm --dtype bf16 --shape decode --variant dec2,dec2+sk2,dec2+sk4 --iters 20
  t dec_head$r 40 $B/gemm_head --dtype bf16 --shape decode --variant dec2 --iters 20
done
t sm_new 40 $B/gemm --dtype bf16 --shape smallm --variant w1,w1+sk2,dec2,dec2+sk2 --iters 20
t sm_head 40 $B/gemm_head --dtype bf16 --shape smallm --variant w1,w1+sk2,dec2 --iters 20
for f in $OUT/dec_*.log $OUT/sm_*.log; do
  echo "== $(basename $f .log)" >> $S
  grep -E "engine .* ms|clean-flush" $f | sed 's/  */ /g' | cut -c1-170 >> $S
done
pack; cat $S
