# Session 37 call 7 (nvidia-h200): the final build (the epilogue's skip of row halves past a tile's end;
# B ahead removed) against 18e3152
# (loom_base): the MoE GPU tests (also with LOOM_MOE_NARROW=0), then base / new alternating,
# three processes each; traces at T = 1 / 128.
source scratch/dev_env.sh
B=scratch/bin
t moe-single 150 $B/test_moe single
t moe-loop 150 $B/test_moe loopback --every 5
LOOM_MOE_NARROW=0 t moe-single-n0 150 $B/test_moe single
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
M="--gpus 1 --impl fused --tokens 1,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 20"
for r in 1 2 3; do
  for b in loom_base loom; do
    t dec-$b-$r 40 $B/$b moe $D
    t qwen-$b-$r 40 $B/$b moe $Q
    t mix-$b-$r 60 $B/$b moe $M
    t pre-$b-$r 40 $B/$b moe $P
  done
done
for b in loom_base loom; do
  t tr1-$b 30 $B/$b moe --gpus 1 --impl fused --tokens 1 --experts 64 --topk 8 --iters 5 --trace $OUT/tr1-$b.json
  t tr128-$b 30 $B/$b moe --gpus 1 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr128-$b.json
  python3 bench/trace_stats.py $OUT/tr128-$b.json > $OUT/tr128-$b.txt 2>&1
  python3 bench/trace_stats.py $OUT/tr1-$b.json > $OUT/tr1-$b.txt 2>&1
done
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/qwen-* $OUT/logs/mix-* $OUT/logs/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when|GEMM" $f | cut -c1-400; done >> $S
pack; cat $S
