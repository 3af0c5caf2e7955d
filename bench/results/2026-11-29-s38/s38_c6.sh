# Session 38 call 6 (nvidia-h200): the head without 64-bit division subroutines (place_lo, place's
# group, combine's slice bounds in 32 bits) -- test_moe single, then loom_head (2cc2b02's kernel =
# 38f6df8's) / loom alternating, three rounds.
DEADLINE=230
source scratch/dev_env.sh
B=scratch/bin
t moe-single 100 $B/test_moe single
D="--gpus 1 --impl fused --tokens 1,16,128 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
M="--gpus 1 --impl fused --tokens 1,16 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
P="--gpus 1 --impl fused --tokens 4096 --iters 20"
for r in 1 2 3; do
  for b in loom_head loom; do
    t dec-$b-$r 30 $B/$b moe $D
    t qwen-$b-$r 30 $B/$b moe $Q
    t mix-$b-$r 30 $B/$b moe $M
    t pre-$b-$r 30 $B/$b moe $P
  done
done
for f in $OUT/logs/dec-* $OUT/logs/qwen-* $OUT/logs/mix-* $OUT/logs/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ') | $(grep -o 'phases end at.*' $f | head -1)"; done >> $S
pack; cat $S
