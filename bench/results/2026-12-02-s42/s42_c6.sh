# Session 42 call 6 (nvidia-h200): (1) the dispatch's piece walk 32 entries a step (a warp
# scan) and (2) moe_counts run dry by the blocks idle at grid barrier 1 (gate jobs done,
# not a finisher: decode), so the real one runs warm; loom with LOOM_MOE_WARM=0 is (1)
# alone. Against 0d86c9a (loom_b). Tests first (test_moe single, loopback --special,
# test_faults loopback: the split barrier's abort path), then timings alternating.
DEADLINE=380
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t moe-single 90 $B/test_moe single
t moe-loop-special 70 $B/test_moe loopback --special
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
Q="--gpus 1 --impl fused --tokens 1,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40 --check-tokens 16"
M="--gpus 1 --impl fused --tokens 1,16 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20 --check-tokens 8"
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 8"
for r in 1 2; do
  t dec-b-$r 20 $B/loom_b moe $D
  t dec-w0-$r 20 env LOOM_MOE_WARM=0 $B/loom moe $D
  t dec-w1-$r 20 $B/loom moe $D
  t qwen-b-$r 15 $B/loom_b moe $Q
  t qwen-w0-$r 15 env LOOM_MOE_WARM=0 $B/loom moe $Q
  t qwen-w1-$r 15 $B/loom moe $Q
done
t mix-b 20 $B/loom_b moe $M
t mix-w1 20 $B/loom moe $M
t pre-b 15 $B/loom_b moe $P
t pre-w1 15 $B/loom moe $P
t tr-dec 20 $B/loom moe --gpus 1 --impl fused --tokens 1,128 --experts 64 --topk 8 --iters 20 --check-tokens 8 --trace $OUT/trd.json
t faults-loop 60 $B/test_faults loopback
gzip $OUT/*.json 2>/dev/null
for f in $OUT/dec-* $OUT/qwen-* $OUT/mix-* $OUT/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*gate \([0-9]*\),.*/\1 (gate \2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
