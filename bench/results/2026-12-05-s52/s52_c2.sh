# Session 52 call 2 (nvidia-h100-x1 or nvidia-h200): where the fast gate's time goes (3251cdc's
# binaries = 77c95e1's code). The gate phase against hidden size (1024 / 2048 / 3072, E = 32,
# T = 16384), exact and fast, two rounds: slope = the chunk loop, intercept = the fixed costs;
# the gate against T (fast, 1024 .. 16384); then ncu per instruction (warp-state samples) of one
# fast launch at T = 16384, exported for bench/ncu_lines.py against the local moe.o.
DEADLINE=${DEADLINE:-420}
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for r in 1 2; do
  for g in exact fast; do
    for h in 1024 2048 3072; do
      t h${h}_${g}_$r 30 $B/loom moe --gpus 1 --impl fused --tokens 16384 --hidden $h --iters 20 --check-tokens 8 --gate $g
    done
  done
done
t tsweep_fast 40 $B/loom moe --gpus 1 --impl fused --tokens 1024,2048,4096,8192,16384 --iters 20 --check-tokens 8 --gate fast
t tsweep_exact 40 $B/loom moe --gpus 1 --impl fused --tokens 1024,2048,4096,8192,16384 --iters 20 --check-tokens 8 --gate exact
t ncu16kf 150 $NCU --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
   --section WarpStateStats --section SourceCounters -o $OUT/n16kf \
   $B/loom moe --gpus 1 --impl fused --iters 1 --warmup 2 --check-tokens 4 --tokens 16384 --gate fast
[ -f $OUT/n16kf.ncu-rep ] && $NCU -i $OUT/n16kf.ncu-rep --page details 2>/dev/null | head -120 > $OUT/n16kf_details.txt
[ -f $OUT/n16kf.ncu-rep ] && $NCU -i $OUT/n16kf.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/n16kf_sass.csv.gz
rm -f $OUT/n16kf.ncu-rep
for f in $OUT/h* $OUT/tsweep*; do echo "== $(basename $f .log)"; grep -E "median" $f | grep fused | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; grep -c "verify: ok" $f; done >> $S
grep -E "Duration|Issued|Warp Cycles" $OUT/n16kf_details.txt | head -8 >> $S
mkdir -p $OUT/keep && mv $OUT/*_sass.csv.gz $OUT/keep/ 2>/dev/null
pack; mv $OUT/keep/* $OUT/ 2>/dev/null; rmdir $OUT/keep; cat $S
