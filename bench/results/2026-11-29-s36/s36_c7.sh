# Session 36 call 7 (nvidia-h200): half-width tasks off / on at the smallest decode points,
# six processes each, alternating (ca50cf2's build, as call 6).
source scratch/dev_env.sh
B=scratch/bin
D="--gpus 1 --impl fused --tokens 1,2,4 --experts 64 --topk 8 --iters 100"
M="--gpus 1 --impl fused --tokens 1,4 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 40"
for r in 1 2 3 4 5 6; do
  for n in 0 1; do LOOM_MOE_NARROW=$n t dec-n$n-$r 40 $B/loom moe $D; done
done
for r in 1 2 3; do
  for n in 0 1; do LOOM_MOE_NARROW=$n t mix-n$n-$r 60 $B/loom moe $M; done
done
for f in $OUT/logs/dec-* $OUT/logs/mix-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*experts \([0-9]*\).*/\1 (experts end \2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
