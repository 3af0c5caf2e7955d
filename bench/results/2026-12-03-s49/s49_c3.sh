# Session 49 call 3 (nvidia-h200): where the gate's and the decode head's time is now (4275e65):
# ncu per instruction (warp-state samples) of one launch at T = 16384 and at decode T = 1;
# decode with and without an L2 flush before each iteration (is the head's code coming from
# HBM anyway?); the gate at H = 1920 / 2304 beside 2048 (its fixed part, as session 48 (e));
# a trace of the probe build (loom_probe: 4275e65 + probe_unit.diff with -DMOE_HEAD_PROBE: slice 105 a gate unit) at T = 16384.
DEADLINE=560
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
D="--gpus 1 --impl fused --experts 64 --topk 8 --iters 30"
for r in 1 2; do
  t dec_$r 40 $B/loom moe $D --tokens 1,128
  t decflush_$r 40 $B/loom moe $D --tokens 1,128 --flush-l2 1
done
for h in 1920 2048 2304; do
  t h${h} 40 $B/loom moe --gpus 1 --impl fused --tokens 16384 --hidden $h --iters 20 --check-tokens 8
done
t probe16k 60 $B/loom_probe moe --gpus 1 --impl fused --iters 3 --check-tokens 4 --tokens 16384 --trace $OUT/p16k.json
gzip -f $OUT/p16k.json
t ncu16k 150 $NCU --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
   --section WarpStateStats --section SourceCounters -o $OUT/n16k \
   $B/loom moe --gpus 1 --impl fused --iters 1 --warmup 2 --check-tokens 4 --tokens 16384
[ -f $OUT/n16k.ncu-rep ] && $NCU -i $OUT/n16k.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/n16k_sass.csv.gz
rm -f $OUT/n16k.ncu-rep
t ncudec 120 $NCU --clock-control none -k regex:moe_kernel --launch-skip 5 --launch-count 1 \
   --section WarpStateStats --section SourceCounters -o $OUT/ndec \
   $B/loom moe --gpus 1 --impl fused --iters 1 --warmup 5 --experts 64 --topk 8 --tokens 1
[ -f $OUT/ndec.ncu-rep ] && $NCU -i $OUT/ndec.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/ndec_sass.csv.gz
rm -f $OUT/ndec.ncu-rep
for f in $OUT/dec* $OUT/h*; do echo "== $(basename $f .log)"; grep -E "median" $f | grep fused | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; done >> $S
mkdir -p $OUT/keep && mv $OUT/*_sass.csv.gz $OUT/p16k.json.gz $OUT/keep/ 2>/dev/null
pack; mv $OUT/keep/* $OUT/ 2>/dev/null; rmdir $OUT/keep; cat $S
