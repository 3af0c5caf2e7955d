# Session 39 call 7 (nvidia-h200): one swapped tile of 32 rows (m64n32, 8 stages of 16 + 4 KB) for
# every call whose experts have <= 32 rows, in place of the 16-row one (swap32 with a single
# instantiation) -- loom16 (2ad3717) / loom alternating, two rounds, then the tests (device time
# for one call only: what does not fit the deadline is skipped).
DEADLINE=200
source scratch/dev_env.sh
B=scratch/bin
D="--gpus 1 --impl fused --tokens 1,16,128 --experts 64 --topk 8 --iters 30"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 30"
M="--gpus 1 --impl fused --tokens 1,4,16 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10"
for r in 1 2; do
  for b in loom16 loom; do
    t dec-$b-$r 30 $B/$b moe $D
    t qwen-$b-$r 30 $B/$b moe $Q
    t mix-$b-$r 40 $B/$b moe $M
  done
done
for f in $OUT/logs/dec-* $OUT/logs/qwen-* $OUT/logs/mix-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
t moe-single 90 $B/test_moe single
t moe-loop-special 70 $B/test_moe loopback --special
pack; cat $S
