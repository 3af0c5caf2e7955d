# Session 42 call 2 (nvidia-h200): the gate's stream loop without integer divisions
# (gate_pos cursor, the read slot reused for the refill) against HEAD 6ab385f (loom_head).
# test_moe single first (routing must not move: the logits are the same sums), then
# fused medians alternating, two rounds: prefill E = 32 k = 2, Qwen3 shape, decode.
DEADLINE=300
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t moe-single 90 $B/test_moe single
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 20 --check-tokens 16"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 16"
D="--gpus 1 --impl fused --tokens 1,128 --experts 64 --topk 8 --iters 40 --check-tokens 16"
for r in 1 2; do
  for b in loom_head loom; do
    t pre-$b-$r 20 $B/$b moe $P
    t qwen-$b-$r 20 $B/$b moe $Q
    t dec-$b-$r 15 $B/$b moe $D
  done
done
t tr-new 30 $B/loom moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 8 --trace $OUT/tr16k.json
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/dec-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*gate \([0-9]*\),.*/\1 (gate \2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
