# Session 37 call 6 (nvidia-h200): B ahead for GEMM0 too (LOOM_MOE_B_AHEAD: bit 0 GEMM1, bit 1
# GEMM0; 3 = both, 1 = fd736ae's GEMM1 only, 0 = none), same binary: the MoE GPU tests at the
# default (3), then 1 / 3 / 0 alternating, three processes each; traces at T = 1 / 128.
source scratch/dev_env.sh
B=scratch/bin
t moe-single 150 $B/test_moe single
t moe-loop 150 $B/test_moe loopback --every 5
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
M="--gpus 1 --impl fused --tokens 1,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 20"
for r in 1 2 3; do
  for a in 1 3 0; do
    LOOM_MOE_B_AHEAD=$a t dec-a$a-$r 40 $B/loom moe $D
    LOOM_MOE_B_AHEAD=$a t qwen-a$a-$r 40 $B/loom moe $Q
    LOOM_MOE_B_AHEAD=$a t mix-a$a-$r 60 $B/loom moe $M
    LOOM_MOE_B_AHEAD=$a t pre-a$a-$r 40 $B/loom moe $P
  done
done
for tk in 1 128; do
  t tr$tk 30 $B/loom moe --gpus 1 --impl fused --tokens $tk --experts 64 --topk 8 --iters 5 --trace $OUT/tr$tk.json
  python3 bench/trace_stats.py $OUT/tr$tk.json > $OUT/tr$tk.txt 2>&1
done
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/qwen-* $OUT/logs/mix-* $OUT/logs/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when|GEMM" $f | cut -c1-400; done >> $S
pack; cat $S
