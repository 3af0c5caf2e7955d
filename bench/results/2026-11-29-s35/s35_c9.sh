# Session 35 call 9 (nvidia-h200): a tile of gate jobs finished by up to four blocks, a share of
# its tokens each (one token a warp at T >= 32), counts added into the tile's (zeroed by one
# job): the MoE GPU tests (single, loopback), decode jobs off / on (against call 5, where a tile
# had one finisher), a T = 128 trace.
DEADLINE=170
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t moe-single 60 $B/test_moe single --every 2
t moe-loop 60 $B/test_moe loopback --every 7
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
M="--gpus 1 --impl fused --tokens 1,16,128 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --iters 20"
for r in 1 2; do
  LOOM_MOE_GATE_JOBS=0 t dec-off-$r 30 $B/loom moe $D
  t dec-on-$r 30 $B/loom moe $D
done
LOOM_MOE_GATE_JOBS=0 t mix-off 30 $B/loom moe $M
t mix-on 30 $B/loom moe $M
t tr128 20 $B/loom moe --gpus 1 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr128.json
python3 bench/trace_stats.py $OUT/tr128.json > $OUT/tr128.txt 2>&1
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/mix-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
grep -E "when|  gate" $OUT/tr128.txt | cut -c1-400 >> $S
pack; cat $S
