# Session 44 call 4 (nvidia-h200): loom_e = the 128 x 256 consumers epilogue without the
# reloads at its head (the thread index read where used, the return bases in shared memory,
# the task columns in the task record) against HEAD 1d5f753 (loom_b), alternating; traces;
# loom_e GPU tests.
DEADLINE=440
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 8"
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40 --check-tokens 16"
M="--gpus 1 --impl fused --tokens 1,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 10 --check-tokens 8"
for r in 1 2; do
  t pre-b-$r 20 $B/loom_b moe $P
  t pre-e-$r 20 $B/loom_e moe $P
  t qwen-b-$r 20 $B/loom_b moe $Q
  t qwen-e-$r 20 $B/loom_e moe $Q
done
t dec-b 20 $B/loom_b moe $D
t dec-e 20 $B/loom_e moe $D
t mix-b 25 $B/loom_b moe $M
t mix-e 25 $B/loom_e moe $M
t f32-b 25 $B/loom_b moe $P --dtype fp32
t f32-e 25 $B/loom_e moe $P --dtype fp32
t tr-b 30 $B/loom_b moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/trb.json
t tr-e 30 $B/loom_e moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/tre.json
t tr4-b 30 $B/loom_b moe --gpus 1 --impl fused --tokens 4096 --iters 5 --check-tokens 8 --trace $OUT/tr4b.json
t tr4-e 30 $B/loom_e moe --gpus 1 --impl fused --tokens 4096 --iters 5 --check-tokens 8 --trace $OUT/tr4e.json
t trq-b 30 $B/loom_b moe $Q --trace $OUT/trqb.json
t trq-e 30 $B/loom_e moe $Q --trace $OUT/trqe.json
t moe-single 110 $B/test_moe_e single
t moe-loop-special 80 $B/test_moe_e loopback --special
t faults-loop 40 $B/test_faults_e loopback
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/dec-* $OUT/mix-* $OUT/f32-* $OUT/tr*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
