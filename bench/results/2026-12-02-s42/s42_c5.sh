# Session 42 call 5 (nvidia-h200): is the decode dispatch late because it runs on the
# producer warpgroup's background warps after the expert roles' setup? The same binary
# (0d86c9a) with LOOM_MOE_FG=0 (every piece in the foreground, one a warp, right after
# moe_counts) against the default (this rank's first local expert's pieces up front),
# alternating, two rounds; traces at T = 1 both ways.
DEADLINE=300
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
Q="--gpus 1 --impl fused --tokens 1,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40 --check-tokens 16"
M="--gpus 1 --impl fused --tokens 1,16 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20 --check-tokens 8"
P="--gpus 1 --impl fused --tokens 4096 --iters 20 --check-tokens 16"
for r in 1 2; do
  for fg in 1 0; do
    t dec-fg$fg-$r 20 env LOOM_MOE_FG=$fg $B/loom moe $D
    t qwen-fg$fg-$r 15 env LOOM_MOE_FG=$fg $B/loom moe $Q
  done
done
for fg in 1 0; do
  t mix-fg$fg 20 env LOOM_MOE_FG=$fg $B/loom moe $M
  t pre-fg$fg 10 env LOOM_MOE_FG=$fg $B/loom moe $P
  t tr-fg$fg 20 env LOOM_MOE_FG=$fg $B/loom moe --gpus 1 --impl fused --tokens 1,128 --experts 64 --topk 8 --iters 20 --check-tokens 8 --trace $OUT/trfg$fg.json
done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/dec-* $OUT/qwen-* $OUT/mix-* $OUT/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*gate \([0-9]*\),.*/\1 (gate \2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
