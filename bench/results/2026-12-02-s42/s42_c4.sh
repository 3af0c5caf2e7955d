# Session 42 call 4 (nvidia-h200): the gate finisher's dry run (decode / small T, gate jobs):
# the finish code run once on whatever the parts buffer holds, nothing stored, while the
# tile's jobs finish, so the real finish runs warm; against 0d86c9a (loom_b). test_moe single
# and loopback --special, then decode alternating (two rounds), Qwen3 decode, prefill sanity,
# traces at T = 1 and 128.
DEADLINE=330
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t moe-single 90 $B/test_moe single
t moe-loop-special 80 $B/test_moe loopback --special
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
Q="--gpus 1 --impl fused --tokens 1,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40 --check-tokens 16"
M="--gpus 1 --impl fused --tokens 1,16 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20 --check-tokens 8"
P="--gpus 1 --impl fused --tokens 4096 --iters 20 --check-tokens 16"
for r in 1 2; do
  for b in loom_b loom; do
    t dec-$b-$r 20 $B/$b moe $D
    t qwen-$b-$r 15 $B/$b moe $Q
  done
done
for b in loom_b loom; do
  t mix-$b 20 $B/$b moe $M
  t pre-$b 10 $B/$b moe $P
done
t tr-dec 20 $B/loom moe --gpus 1 --impl fused --tokens 1,128 --experts 64 --topk 8 --iters 20 --check-tokens 8 --trace $OUT/trd.json
gzip $OUT/*.json 2>/dev/null
for f in $OUT/dec-* $OUT/qwen-* $OUT/mix-* $OUT/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*gate \([0-9]*\),.*/\1 (gate \2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
