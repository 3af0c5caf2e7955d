# Session 40 call 3 (nvidia-h200, build/s40 from call 1): the swapped-tile diff against HEAD,
# alternating binaries, one process a run, two rounds: loom_head (HEAD), loom_swap (the diff),
# swap16 (loom_swap with LOOM_MOE_SWAP=16: only the 16-row tile, HEAD's choice in the diff's code).
DEADLINE=570
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=build/s40
D="--gpus 1 --impl fused --tokens 1,16,32,128 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
M="--gpus 1 --impl fused --tokens 1,4,16 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
P="--gpus 1 --impl fused --tokens 4096 --iters 20"
for r in 1 2; do
  for b in loom_head loom_swap swap16; do
    x=$b; e=""
    [ $b = swap16 ] && { x=loom_swap; e="env LOOM_MOE_SWAP=16"; }
    t dec-$b-$r 40 $e $B/$x moe $D
    t qwen-$b-$r 30 $e $B/$x moe $Q
    t mix-$b-$r 40 $e $B/$x moe $M
    t pre-$b-$r 30 $e $B/$x moe $P
  done
done
for f in $OUT/dec-* $OUT/qwen-* $OUT/mix-* $OUT/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
