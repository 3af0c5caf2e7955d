# Session 36 call 6 (nvidia-h200): half-width expert tasks where a GEMM's tasks fill at most
# half the grid (LOOM_MOE_NARROW, default on) on 51abc3a: the MoE GPU tests (on, and off),
# decode / Mixtral / Qwen3 / prefill off / on alternating, traces at T = 1.
source scratch/dev_env.sh
B=scratch/bin
t moe-single 150 $B/test_moe single
t moe-loop 150 $B/test_moe loopback --every 5
LOOM_MOE_NARROW=0 t moe-single-off 150 $B/test_moe single
D="--gpus 1 --impl fused --tokens 1,2,4,16,128,512 --experts 64 --topk 8 --iters 40"
M="--gpus 1 --impl fused --tokens 1,4,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
for r in 1 2; do
  for n in 0 1; do
    LOOM_MOE_NARROW=$n t dec-n$n-$r 60 $B/loom moe $D
    LOOM_MOE_NARROW=$n t mix-n$n-$r 90 $B/loom moe $M
    LOOM_MOE_NARROW=$n t qwen-n$n-$r 60 $B/loom moe $Q
  done
done
t grid 60 $B/loom moe --gpus 1 --impl fused --tokens 4096,8192,16384 --iters 20
t both-dec 60 $B/loom moe --gpus 1 --impl both --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
t both-mix 90 $B/loom moe --gpus 1 --impl both --tokens 1,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20
for n in 0 1; do
  LOOM_MOE_NARROW=$n t tr1-n$n 30 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 64 --topk 8 --iters 5 --trace $OUT/tr1-n$n.json
  python3 bench/trace_stats.py $OUT/tr1-n$n.json > $OUT/tr1-n$n.txt 2>&1
done
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/mix-* $OUT/logs/grid* $OUT/logs/qwen-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
grep -E "^ +[0-9]+ (fused|baseline)" $OUT/logs/both-*.log >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when" $f | cut -c1-330; done >> $S
pack; cat $S
