# Session 36 call 3 (nvidia-h200): the experts' weights evict-first in L2 (LOOM_MOE_L2_STREAM
# 0 normal / 1 where one row tile reads them / 2 always), gate_tokens as at 3da3555 (the sort
# of calls 1-2 not kept), the tile's finish in 4 shares: tests, decode / Mixtral / Qwen3 /
# prefill A/B, traces, ncu stall sampling with the policy on.
source scratch/dev_env.sh
B=scratch/bin
t moe-single 150 $B/test_moe single
LOOM_MOE_L2_STREAM=2 t moe-single-l2all 150 $B/test_moe single
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
M="--gpus 1 --impl fused --tokens 1,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --iters 20"
Q="--gpus 1 --impl fused --tokens 1,128,8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20"
G="--gpus 1 --impl fused --tokens 4096,8192,16384 --iters 20"
for r in 1 2; do
  for l in 0 1 2; do
    LOOM_MOE_L2_STREAM=$l t dec-l$l-$r 40 $B/loom moe $D
    LOOM_MOE_L2_STREAM=$l t mix-l$l-$r 60 $B/loom moe $M
  done
done
for l in 0 1 2; do
  LOOM_MOE_L2_STREAM=$l t qwen-l$l 60 $B/loom moe $Q
  LOOM_MOE_L2_STREAM=$l t grid-l$l 60 $B/loom moe $G
done
LOOM_MOE_GATE_FIN_PARTS=1 t dec-f1 40 $B/loom moe $D
t both-dec 60 $B/loom moe --gpus 1 --impl both --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
for l in 0 1; do
  LOOM_MOE_L2_STREAM=$l t tr128-l$l 30 $B/loom moe --gpus 1 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr128-l$l.json
  python3 bench/trace_stats.py $OUT/tr128-l$l.json > $OUT/tr128-l$l.txt 2>&1
done
LOOM_MOE_L2_STREAM=1 t ncu-l1 200 ncu --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section SpeedOfLight --section MemoryWorkloadAnalysis \
    -f -o $OUT/ncu_l1 $B/loom moe --gpus 1 --impl fused --tokens 128 --experts 64 --topk 8 --iters 3
ncu -i $OUT/ncu_l1.ncu-rep --page source --csv --print-source sass > $OUT/ncu_l1_sass.csv 2> $OUT/ncu_l1_sass.err
ncu -i $OUT/ncu_l1.ncu-rep --page details --csv > $OUT/ncu_l1_details.csv 2>&1
rm -f $OUT/ncu_l1.ncu-rep
gzip $OUT/*.json $OUT/*.csv
for f in $OUT/logs/dec-* $OUT/logs/mix-* $OUT/logs/grid-* $OUT/logs/qwen-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
grep -E "^ +[0-9]+ (fused|baseline)" $OUT/logs/both-dec.log >> $S
for l in 0 1; do grep -E "when" $OUT/tr128-l$l.txt | cut -c1-400 >> $S; done
pack; cat $S
