# Session 38 call 2 (nvidia-h200): split K for GEMMs with few column tasks (moe_split_of /
# moe_split_fold) -- GPU tests (new decode family), loopback; LOOM_MOE_SPLIT = 0 / 1 alternating in
# one binary, three rounds; traces E = 64 T = 1 and Mixtral-like T = 1 both ways; memcheck of one call.
source scratch/dev_env.sh
B=scratch/bin
t moe-single 170 $B/test_moe single
t moe-loop 170 $B/test_moe loopback --every 5
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
M="--gpus 1 --impl fused --tokens 1,4,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 20"
for r in 1 2 3; do
  for w in 0 1; do
    export LOOM_MOE_SPLIT=$w
    t dec-s$w-$r 40 $B/loom moe $D
    t qwen-s$w-$r 40 $B/loom moe $Q
    t mix-s$w-$r 60 $B/loom moe $M
    t pre-s$w-$r 40 $B/loom moe $P
  done
done
for w in 0 1; do
  export LOOM_MOE_SPLIT=$w
  t tr1-s$w 30 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 64 --topk 8 --iters 5 --trace $OUT/tr1-s$w.json
  python3 bench/trace_stats.py $OUT/tr1-s$w.json > $OUT/tr1-s$w.txt 2>&1
  t trm-s$w 30 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 5 --trace $OUT/trm-s$w.json
  python3 bench/trace_stats.py $OUT/trm-s$w.json > $OUT/trm-s$w.txt 2>&1
done
export LOOM_MOE_SPLIT=1
t memcheck 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 8 --topk 2 --hidden 1024 --ffn 4096 --act swiglu --iters 2
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/qwen-* $OUT/logs/mix-* $OUT/logs/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when|GEMM" $f | cut -c1-400; done >> $S
pack; cat $S
