# Session 38 call 3 (nvidia-h200-x2): split K, fixed (the expert phase's ticket total counts the
# K shares) -- GPU tests at 1 and 2 GPUs and loopback's special cases; LOOM_MOE_SPLIT = 0 / 1
# alternating at 1 GPU (two rounds) and at 2 GPUs (--impl both, one round); traces; memcheck.
source scratch/dev_env.sh
B=scratch/bin
t moe-single 220 $B/test_moe single
t moe-loop-special 120 $B/test_moe loopback --special
D="--impl fused --tokens 1,16,128 --experts 64 --topk 8 --iters 40"
Q="--impl fused --tokens 1,16 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
M="--impl fused --tokens 1,4,16 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
for r in 1 2; do
  for w in 0 1; do
    export LOOM_MOE_SPLIT=$w
    t dec-s$w-$r 40 $B/loom moe --gpus 1 $D
    t qwen-s$w-$r 40 $B/loom moe --gpus 1 $Q
    t mix-s$w-$r 60 $B/loom moe --gpus 1 $M
  done
done
for w in 0 1; do
  export LOOM_MOE_SPLIT=$w
  t dec2-s$w 60 $B/loom moe --gpus 2 ${D/fused/both}
  t mix2-s$w 90 $B/loom moe --gpus 2 ${M/fused/both}
done
export LOOM_MOE_SPLIT=1
t tr1-s1 30 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 64 --topk 8 --iters 5 --trace $OUT/tr1-s1.json
python3 bench/trace_stats.py $OUT/tr1-s1.json > $OUT/tr1-s1.txt 2>&1
t trm-s1 30 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 5 --trace $OUT/trm-s1.json
python3 bench/trace_stats.py $OUT/trm-s1.json > $OUT/trm-s1.txt 2>&1
t memcheck 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 8 --topk 2 --hidden 1024 --ffn 4096 --act swiglu --iters 2
gzip $OUT/*.json
for f in $OUT/logs/dec* $OUT/logs/qwen-* $OUT/logs/mix*; do echo "$(basename $f .log): $(grep -E '(fused|nccl|baseline)[^ ]* +median' $f | sed 's/^ *\([a-z+]*\).*median \([0-9.]*\) us.*/\1 \2/' | tr '\n' ' ')"; done >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when|GEMM" $f | cut -c1-400; done >> $S
pack; cat $S
