# Session 45 call 3 (nvidia-h200): HEAD 6054f26 (loom_e) only, environment sweeps at one GPU:
# the expert phase's foreground dispatch share (LOOM_MOE_FG: local experts whose rows every
# warp copies before the GEMMs; the rest goes out beside them on the producer warpgroup's two
# copy warps) on the Qwen3 shape (GEMM0s waited for the background copy, session 44) and the
# E = 32 grid; the activation's cost today (--act relu / silu / gelu at T = 16384).
DEADLINE=300
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,8192,16384 --iters 10 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 8"
M="--gpus 1 --impl fused --tokens 2048,8192 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10 --check-tokens 8"
for r in 1 2; do
  for f in 1 4 8 16 24; do t qwen-fg$f-$r 20 env LOOM_MOE_FG=$f $B/loom_e moe $Q; done
done
for r in 1 2; do
  for f in 1 2 3; do t pre-fg$f-$r 25 env LOOM_MOE_FG=$f $B/loom_e moe $P; done
done
for f in 1 2; do t mix-fg$f 30 env LOOM_MOE_FG=$f $B/loom_e moe $M; done
for a in relu silu gelu; do t act-$a 20 $B/loom_e moe --gpus 1 --impl fused --tokens 16384 --iters 10 --check-tokens 8 --act $a; done
t trq-fg16 30 env LOOM_MOE_FG=16 $B/loom_e moe $Q --trace $OUT/trqfg16.json
gzip $OUT/*.json 2>/dev/null
for f in $OUT/qwen-* $OUT/pre-* $OUT/mix-* $OUT/act-* $OUT/trq-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
