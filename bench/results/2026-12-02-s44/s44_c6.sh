# Session 44 call 6 (nvidia-h200): loom_g = loom_e (0dbc6b6) with the 128 x 256 epilogue's
# 16-bit rows stored 8 bytes a lane after one pair exchange (moe_pair_store) instead of 16
# after the quad transpose's two rounds, against loom_e, alternating; traces; loom_g tests.
DEADLINE=440
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 8"
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
M="--gpus 1 --impl fused --tokens 1,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10 --check-tokens 8"
for r in 1 2; do
  t pre-e-$r 20 $B/loom_e moe $P
  t pre-g-$r 20 $B/loom_g moe $P
  t qwen-e-$r 20 $B/loom_e moe $Q
  t qwen-g-$r 20 $B/loom_g moe $Q
done
t dec-e 20 $B/loom_e moe $D
t dec-g 20 $B/loom_g moe $D
t mix-e 25 $B/loom_e moe $M
t mix-g 25 $B/loom_g moe $M
t f32-e 25 $B/loom_e moe $P --dtype fp32
t f32-g 25 $B/loom_g moe $P --dtype fp32
t tr-e 30 $B/loom_e moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/tre.json
t tr-g 30 $B/loom_g moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/trg.json
t tr4-e 30 $B/loom_e moe --gpus 1 --impl fused --tokens 4096 --iters 5 --check-tokens 8 --trace $OUT/tr4e.json
t tr4-g 30 $B/loom_g moe --gpus 1 --impl fused --tokens 4096 --iters 5 --check-tokens 8 --trace $OUT/tr4g.json
t trq-e 30 $B/loom_e moe $Q --trace $OUT/trqe.json
t trq-g 30 $B/loom_g moe $Q --trace $OUT/trqg.json
t moe-single 110 $B/test_moe_g single
t moe-loop-special 80 $B/test_moe_g loopback --special
t faults-loop 40 $B/test_faults_g loopback
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/dec-* $OUT/mix-* $OUT/f32-* $OUT/tr*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
