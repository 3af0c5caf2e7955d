# Session 42 call 7 (nvidia-h200): B ahead in the swapped decode ring: a GEMM1 task whose
# GEMM0s are not done loads its first stages of weights before the wait, into the stages
# the GEMM0s ahead of it free (LOOM_MOE_B_AHEAD=0: as before). Tests, then the same binary
# both ways, alternating, two rounds; a trace at T = 1.
DEADLINE=330
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t moe-single 90 $B/test_moe single
t moe-loop-special 70 $B/test_moe loopback --special
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
Q="--gpus 1 --impl fused --tokens 1,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40 --check-tokens 16"
M="--gpus 1 --impl fused --tokens 1,16 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20 --check-tokens 8"
P="--gpus 1 --impl fused --tokens 4096 --iters 20 --check-tokens 8"
for r in 1 2; do
  for a in 0 1; do
    t dec-a$a-$r 20 env LOOM_MOE_B_AHEAD=$a $B/loom moe $D
    t qwen-a$a-$r 15 env LOOM_MOE_B_AHEAD=$a $B/loom moe $Q
  done
done
for a in 0 1; do
  t mix-a$a 20 env LOOM_MOE_B_AHEAD=$a $B/loom moe $M
  t pre-a$a 10 env LOOM_MOE_B_AHEAD=$a $B/loom moe $P
done
t tr-dec 20 $B/loom moe --gpus 1 --impl fused --tokens 1,128 --experts 64 --topk 8 --iters 20 --check-tokens 8 --trace $OUT/trd.json
gzip $OUT/*.json 2>/dev/null
for f in $OUT/dec-* $OUT/qwen-* $OUT/mix-* $OUT/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*gate \([0-9]*\),.*/\1 (gate \2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
