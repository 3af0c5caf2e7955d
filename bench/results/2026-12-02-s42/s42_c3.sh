# Session 42 call 3 (nvidia-h200): the dispatch's piece walk without a division a step
# (moe_dest) and moe_counts' tile total from its scan, against 66724b7 (loom_g, the gate
# cursor). test_moe single and loopback --special (several ranks: moe_dest's wrap), then
# decode and prefill alternating, two rounds; a trace of the mma.sync variant's gate at
# T = 16384 (8 warps a block: how fast the gate's passes run on 8 warps, a diagnostic).
DEADLINE=330
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t moe-single 90 $B/test_moe single
t moe-loop-special 80 $B/test_moe loopback --special
D="--gpus 1 --impl fused --tokens 1,16,128 --experts 64 --topk 8 --iters 40 --check-tokens 16"
Q="--gpus 1 --impl fused --tokens 1,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40 --check-tokens 16"
P="--gpus 1 --impl fused --tokens 4096 --iters 20 --check-tokens 16"
for r in 1 2; do
  for b in loom_g loom; do
    t dec-$b-$r 15 $B/$b moe $D
    t qwen-$b-$r 15 $B/$b moe $Q
    t pre-$b-$r 10 $B/$b moe $P
  done
done
t tr-dec 20 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 64 --topk 8 --iters 20 --check-tokens 8 --trace $OUT/trd.json
t tr-mma 30 env LOOM_MOE_ENGINE=mma $B/loom moe --gpus 1 --impl fused --tokens 16384 --weights in-out --iters 3 --check-tokens 8 --trace $OUT/trmma.json
gzip $OUT/*.json 2>/dev/null
for f in $OUT/dec-* $OUT/qwen-* $OUT/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*gate \([0-9]*\),.*/\1 (gate \2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
