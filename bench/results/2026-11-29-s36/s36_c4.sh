# Session 36 call 4 (nvidia-h200): what lands -- a tile's finish in shares (default 4) -- against
# 3da3555 (loom_head), alternating processes; the MoE GPU tests on the new build.
source scratch/dev_env.sh
B=scratch/bin
t moe-single 150 $B/test_moe single
t moe-loop 150 $B/test_moe loopback --every 5
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
M="--gpus 1 --impl fused --tokens 1,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --iters 20"
Q="--gpus 1 --impl fused --tokens 1,128,512 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
for r in 1 2 3; do
  t dec-head-$r 40 $B/loom_head moe $D
  t dec-new-$r 40 $B/loom moe $D
done
for r in 1 2; do
  t mix-head-$r 60 $B/loom_head moe $M
  t mix-new-$r 60 $B/loom moe $M
  t qwen-head-$r 60 $B/loom_head moe $Q
  t qwen-new-$r 60 $B/loom moe $Q
done
t grid-head 60 $B/loom_head moe --gpus 1 --impl fused --tokens 4096,8192,16384 --iters 20
t grid-new 60 $B/loom moe --gpus 1 --impl fused --tokens 4096,8192,16384 --iters 20
t both-dec 60 $B/loom moe --gpus 1 --impl both --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
for b in loom_head loom; do for T in 1 128; do
  t tr$T-$b 30 $B/$b moe --gpus 1 --impl fused --tokens $T --experts 64 --topk 8 --iters 5 --trace $OUT/tr$T-$b.json
  python3 bench/trace_stats.py $OUT/tr$T-$b.json > $OUT/tr$T-$b.txt 2>&1
done; done
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/mix-* $OUT/logs/grid-* $OUT/logs/qwen-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
grep -E "^ +[0-9]+ (fused|baseline)" $OUT/logs/both-dec.log >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when" $f | cut -c1-330; done >> $S
pack; cat $S
