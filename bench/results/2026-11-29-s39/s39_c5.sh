# Session 39 call 5 (nvidia-h200): call 4's binaries; what the swapped tile's code costs the
# paths that do not run it -- loom_head (8bf315f) / loom alternating, five rounds, prefill
# T = 4096 / 16384 (E = 32, k = 2) and decode E = 64 T = 128 (every expert > 16 rows: the 128 x 256 tile).
DEADLINE=200
source scratch/dev_env.sh
B=scratch/bin
for r in 1 2 3 4 5; do
  for b in loom_head loom; do
    t pre-$b-$r 30 $B/$b moe --gpus 1 --impl fused --tokens 4096,16384 --iters 20
    t dec-$b-$r 30 $B/$b moe --gpus 1 --impl fused --tokens 128 --experts 64 --topk 8 --iters 40
  done
done
for f in $OUT/logs/pre-* $OUT/logs/dec-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
