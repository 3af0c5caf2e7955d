# Session 38 call 1 (nvidia-h200): moe_l2_warm (the first GEMM0 wave's weights sent to L2 by TMA
# prefetches right after moe_counts) -- GPU tests, then LOOM_MOE_L2_WARM = 0 (off) / 12 / 25 / 40 MB
# alternating in one binary, three rounds; traces at T = 1 / 16 / 128 off and at the default.
source scratch/dev_env.sh
B=scratch/bin
python3 -c 'import torch; p = torch.cuda.get_device_properties(0); print("L2", p.L2_cache_size)' > $OUT/l2.txt 2>&1
t moe-single 150 $B/test_moe single
LOOM_MOE_L2_WARM=0 t moe-single-w0 150 $B/test_moe single
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
M="--gpus 1 --impl fused --tokens 1,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 20"
for r in 1 2 3; do
  for w in 0 12 25 40; do
    export LOOM_MOE_L2_WARM=$w
    t dec-w$w-$r 40 $B/loom moe $D
    t qwen-w$w-$r 40 $B/loom moe $Q
    t mix-w$w-$r 60 $B/loom moe $M
    t pre-w$w-$r 40 $B/loom moe $P
  done
done
for w in 0 25; do
  export LOOM_MOE_L2_WARM=$w
  for T in 1 16 128; do
    t tr$T-w$w 30 $B/loom moe --gpus 1 --impl fused --tokens $T --experts 64 --topk 8 --iters 5 --trace $OUT/tr$T-w$w.json
    python3 bench/trace_stats.py $OUT/tr$T-w$w.json > $OUT/tr$T-w$w.txt 2>&1
  done
done
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/qwen-* $OUT/logs/mix-* $OUT/logs/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when|GEMM" $f | cut -c1-400; done >> $S
cat $OUT/l2.txt >> $S
pack; cat $S
