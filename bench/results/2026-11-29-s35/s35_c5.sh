# Session 35 call 5 (nvidia-h200): the session's library (gate jobs; the finisher's loads two items
# at once; place's positions by popcount; gate_tokens as at 4011152: the rank form of calls 3-4
# was slower and is gone), real build: the MoE GPU tests (single, loopback), issue 11's
# points at one rank fused beside the baseline, the gate jobs off / on alternating on decode
# (E = 64 k = 8 and E = 8 k = 2), the large-T grid and the Qwen3 shape off / on, a T = 128 trace.
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t moe-single 150 $B/test_moe single
t moe-loop 150 $B/test_moe loopback --every 5
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
M="--gpus 1 --impl fused --tokens 1,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --iters 20"
for r in 1 2; do
  LOOM_MOE_GATE_JOBS=0 t dec-off-$r 40 $B/loom moe $D
  t dec-on-$r 40 $B/loom moe $D
  LOOM_MOE_GATE_JOBS=0 t mix-off-$r 60 $B/loom moe $M
  t mix-on-$r 60 $B/loom moe $M
done
LOOM_MOE_GATE_JOBS=0 t grid-off 60 $B/loom moe --gpus 1 --impl fused --tokens 4096,8192,16384 --iters 20
t grid-on 60 $B/loom moe --gpus 1 --impl fused --tokens 4096,8192,16384 --iters 20
LOOM_MOE_GATE_JOBS=0 t qwen-off 60 $B/loom moe --gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t qwen-on 60 $B/loom moe --gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t both-dec 60 $B/loom moe --gpus 1 --impl both --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
t tr128 30 $B/loom moe --gpus 1 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr128.json
python3 bench/trace_stats.py $OUT/tr128.json > $OUT/tr128.txt 2>&1
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/mix-* $OUT/logs/grid-* $OUT/logs/qwen-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
grep -E "^ +[0-9]+ (fused|baseline)" $OUT/logs/both-dec.log >> $S
grep -E "when" $OUT/tr128.txt | cut -c1-400 >> $S
pack; cat $S
