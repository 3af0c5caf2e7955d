# Session 38 call 4 (nvidia-h200): split K with the fold's epilogue fetching its sums in batches
# (moe_pair) -- GPU tests at 1 GPU and loopback's special cases; loom_head (38f6df8, the session's
# start) / loom LOOM_MOE_SPLIT=1 / loom LOOM_MOE_SPLIT=0 alternating, two rounds; traces.
source scratch/dev_env.sh
B=scratch/bin
t moe-single 150 $B/test_moe single
t moe-loop-special 120 $B/test_moe loopback --special
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
M="--gpus 1 --impl fused --tokens 1,4,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 20"
for r in 1 2; do
  for v in head s1 s0; do
    b=loom; [ $v = head ] && b=loom_head
    export LOOM_MOE_SPLIT=${v#s}; [ $v = head ] && unset LOOM_MOE_SPLIT
    t dec-$v-$r 40 $B/$b moe $D
    t qwen-$v-$r 40 $B/$b moe $Q
    t mix-$v-$r 60 $B/$b moe $M
    t pre-$v-$r 40 $B/$b moe $P
  done
done
export LOOM_MOE_SPLIT=1
t tr1-s1 30 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 64 --topk 8 --iters 5 --trace $OUT/tr1-s1.json
python3 bench/trace_stats.py $OUT/tr1-s1.json > $OUT/tr1-s1.txt 2>&1
t trq-s1 30 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 5 --trace $OUT/trq-s1.json
python3 bench/trace_stats.py $OUT/trq-s1.json > $OUT/trq-s1.txt 2>&1
gzip $OUT/*.json
for f in $OUT/logs/dec* $OUT/logs/qwen-* $OUT/logs/mix* $OUT/logs/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when|GEMM" $f | cut -c1-400; done >> $S
pack; cat $S
