# Session 49 call 4 (nvidia-h200): two more gate changes against 4275e65 (loom_base):
#  A (loom_A, A.diff): the softmax's exp once a logit, the chosen ones' taken by shuffle from the
#    lane that computed them (same values; one fp64 exp less in the code and a token's chain);
#  B (loom_B, B.diff = A + the chunk stream's issue cursor: source rows computed once a unit, not
#    every chunk: ~60 of ~290 warp instructions a chunk at T = 16384).
# GPU tests of both, then base / A / B alternately, three rounds.
DEADLINE=560
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t test_moe_A 170 $B/test_moe_A single
t test_moe_B 170 $B/test_moe_B single
G="--gpus 1 --impl fused --tokens 4096,16384 --iters 20 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
D="--gpus 1 --impl fused --tokens 1,128,512 --experts 64 --topk 8 --iters 30"
for r in 1 2 3; do
  for b in base A B; do
    L=$B/loom_$b
    t grid_${b}_$r 40 $L moe $G
    t qwen3_${b}_$r 40 $L moe $Q
    t dec_${b}_$r 40 $L moe $D
  done
done
for f in $OUT/grid* $OUT/qwen3* $OUT/dec*; do echo "== $(basename $f .log)"; grep -E "median" $f | grep fused | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; grep -c "verify: ok" $f; done >> $S
pack; cat $S
