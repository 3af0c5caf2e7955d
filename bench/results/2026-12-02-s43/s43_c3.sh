# Session 43 call 3 (nvidia-h200): the dispatch copies' x loads through L2 only (ld.global.cg
# instead of __ldg's ld.global.nc, which allocates in L1 beside the GEMM consumers' spill
# slots): loom_x against HEAD (loom_b, f6e2af2) alternating; traces of both at T = 16384
# (GEMM0 slices beside the background dispatch against after it); test_moe single.
DEADLINE=330
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 8"
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
M="--gpus 1 --impl fused --tokens 1,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10 --check-tokens 8"
for r in 1 2; do
  t pre-b-$r 20 $B/loom_b moe $P
  t pre-x-$r 20 $B/loom_x moe $P
  t qwen-b-$r 20 $B/loom_b moe $Q
  t qwen-x-$r 20 $B/loom_x moe $Q
done
t dec-b 20 $B/loom_b moe $D
t dec-x 20 $B/loom_x moe $D
t mix-b 25 $B/loom_b moe $M
t mix-x 25 $B/loom_x moe $M
t tr-b 30 $B/loom_b moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/trb.json
t tr-x 30 $B/loom_x moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/trx.json
t moe-single 100 $B/test_moe single
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/dec-* $OUT/mix-* $OUT/tr-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
