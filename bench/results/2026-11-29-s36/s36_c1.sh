# Session 36 call 1 (nvidia-h200): the gate's top-k by a warp sort (LOOM_MOE_GATE_SORT) and a
# tile's finish in shares (LOOM_MOE_GATE_FIN_PARTS), built here from 3da3555 + both:
# the MoE GPU tests (single, loopback) with both on, then decode off / on alternating.
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t moe-single 150 $B/test_moe single
LOOM_MOE_GATE_SORT=0 LOOM_MOE_GATE_FIN_PARTS=1 t moe-single-old 150 $B/test_moe single
t moe-loop 150 $B/test_moe loopback --every 5
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
M="--gpus 1 --impl fused --tokens 1,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --iters 20"
Q="--gpus 1 --impl fused --tokens 1,128,8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20"
for r in 1 2; do
  for v in "0 1" "1 1" "0 4" "1 4" "1 2"; do set -- $v
    LOOM_MOE_GATE_SORT=$1 LOOM_MOE_GATE_FIN_PARTS=$2 t dec-s$1-f$2-$r 40 $B/loom moe $D
  done
  for v in "0 1" "1 4"; do set -- $v
    LOOM_MOE_GATE_SORT=$1 LOOM_MOE_GATE_FIN_PARTS=$2 t mix-s$1-f$2-$r 60 $B/loom moe $M
    LOOM_MOE_GATE_SORT=$1 LOOM_MOE_GATE_FIN_PARTS=$2 t qwen-s$1-f$2-$r 60 $B/loom moe $Q
  done
done
LOOM_MOE_GATE_SORT=0 t grid-s0 60 $B/loom moe --gpus 1 --impl fused --tokens 4096,8192,16384 --iters 20
t grid-s1 60 $B/loom moe --gpus 1 --impl fused --tokens 4096,8192,16384 --iters 20
t both-dec 60 $B/loom moe --gpus 1 --impl both --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
LOOM_MOE_GATE_SORT=0 LOOM_MOE_GATE_FIN_PARTS=1 t tr128-old 30 $B/loom moe --gpus 1 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr128-old.json
t tr128 30 $B/loom moe --gpus 1 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr128.json
for f in tr128-old tr128; do python3 bench/trace_stats.py $OUT/$f.json > $OUT/$f.txt 2>&1; done
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/mix-* $OUT/logs/grid-* $OUT/logs/qwen-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
grep -E "^ +[0-9]+ (fused|baseline)" $OUT/logs/both-dec.log >> $S
for f in tr128-old tr128; do grep -E "when" $OUT/$f.txt | cut -c1-400 >> $S; done
pack; cat $S
