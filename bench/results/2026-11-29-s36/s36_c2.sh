# Session 36 call 2 (nvidia-h200): (1) gate_tokens inlined (loom_inline) against out of line
# (loom), both with the sort and the finish in 4 shares; (2) ncu warp-stall sampling per SASS
# instruction of one moe_kernel launch at T = 128 (is the head's code fetch-bound?).
source scratch/dev_env.sh
B=scratch/bin
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
for r in 1 2; do
  t dec-out-$r 40 $B/loom moe $D
  t dec-in-$r 40 $B/loom_inline moe $D
  LOOM_MOE_GATE_FIN_PARTS=1 t dec-in-f1-$r 40 $B/loom_inline moe $D
done
t tr128-in 30 $B/loom_inline moe --gpus 1 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr128-in.json
ncu --version > $OUT/ncu_version.txt 2>&1
for b in loom loom_inline; do
  t ncu-$b 200 ncu --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section LaunchStats --section SpeedOfLight \
    -f -o $OUT/ncu_$b $B/$b moe --gpus 1 --impl fused --tokens 128 --experts 64 --topk 8 --iters 3
  ncu -i $OUT/ncu_$b.ncu-rep --page source --csv --print-source sass > $OUT/ncu_${b}_sass.csv 2> $OUT/ncu_${b}_sass.err
  ncu -i $OUT/ncu_$b.ncu-rep --page details --csv > $OUT/ncu_${b}_details.csv 2>&1
  ls -la $OUT/ncu_$b* >> $S
done
gzip $OUT/*.json $OUT/*.csv
for f in $OUT/logs/dec-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
