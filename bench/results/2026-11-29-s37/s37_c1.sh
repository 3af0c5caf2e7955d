# Session 37 call 1 (nvidia-h200): 18e3152's build. ncu warp-stall sampling per SASS instruction
# of one moe_kernel launch at T = 1 (which head code runs, where "no instruction" sits), traces
# at T = 1 / 128, decode medians (three processes) as this session's reference.
source scratch/dev_env.sh
B=scratch/bin
for tk in 1 128; do
  t ncu-t$tk 150 ncu --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
    --section WarpStateStats --section SourceCounters \
    -f -o $OUT/ncu_t$tk $B/loom moe --gpus 1 --impl fused --tokens $tk --experts 64 --topk 8 --iters 3
  ncu -i $OUT/ncu_t$tk.ncu-rep --page source --csv --print-source sass > $OUT/ncu_t${tk}_sass.csv 2> $OUT/ncu_t${tk}.err
done
for tk in 1 128; do
  t tr$tk 30 $B/loom moe --gpus 1 --impl fused --tokens $tk --experts 64 --topk 8 --iters 5 --trace $OUT/tr$tk.json
  python3 bench/trace_stats.py $OUT/tr$tk.json > $OUT/tr$tk.txt 2>&1
done
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
for r in 1 2 3; do t dec-$r 40 $B/loom moe $D; done
rm -f $OUT/*.ncu-rep
gzip $OUT/*.json $OUT/*.csv
for f in $OUT/logs/dec-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when" $f | cut -c1-400; done >> $S
pack; cat $S
