# Session 36 call 5 (nvidia-h200): the decode head with the L2 flushed before every timed
# iteration (the kernel's code then comes from HBM) against back to back, 51abc3a's build.
source scratch/dev_env.sh
B=scratch/bin
D="--gpus 1 --impl fused --experts 64 --topk 8 --iters 40"
for r in 1 2; do
  t dec-$r 40 $B/loom moe $D --tokens 1,16,128,512
  t dec-flush-$r 60 $B/loom moe $D --tokens 1,16,128,512 --flush-l2 1
done
for f in 0 1; do for T in 1 128; do
  t tr$T-f$f 30 $B/loom moe --gpus 1 --impl fused --tokens $T --experts 64 --topk 8 --iters 5 --flush-l2 $f --trace $OUT/tr$T-f$f.json
  python3 bench/trace_stats.py $OUT/tr$T-f$f.json > $OUT/tr$T-f$f.txt 2>&1
done; done
gzip $OUT/*.json
for f in $OUT/logs/dec-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when" $f | cut -c1-330; done >> $S
pack; cat $S
