# Session 53 call 2 (nvidia-h200): the paths the counter change does not touch (stream at T >= 4096,
# jobs at decode) and the Qwen3 point at T = 8192, old (77c95e1's code) vs new (0f87191), alternated, two rounds.
DEADLINE=${DEADLINE:-300}
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
N=scratch/bin; O=scratch/old/bin
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
G="--gpus 1 --impl fused --tokens 4096,8192,16384 --iters 20 --check-tokens 8 --gate fast"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4 --gate fast"
D="--gpus 1 --impl fused --tokens 1,128,512 --experts 64 --topk 8 --iters 30 --gate fast"
for r in 1 2; do
  for v in old new; do
    [ $v = old ] && B=$O || B=$N
    t grid_${v}_$r 40 $B/loom moe $G
    t q_${v}_$r 40 $B/loom moe $Q
    t dec_${v}_$r 40 $B/loom moe $D
  done
done
for f in $OUT/grid_* $OUT/q_* $OUT/dec_*; do echo "== $(basename $f .log)"; grep -E "median" $f | grep fused | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; grep -c "verify: ok" $f; done >> $S
pack; cat $S
