# Session 37 call 4 (nvidia-h200): lean decode calls (one block places a call of gate jobs over
# <= LOOM_MOE_LEAN_TILES token tiles; the others only arrive): the MoE GPU tests (default, lean
# off, lean up to 16 tiles), then lean on / off alternating (same binary), traces at T = 1 / 128.
source scratch/dev_env.sh
B=scratch/bin
t moe-single 150 $B/test_moe single
t moe-loop 150 $B/test_moe loopback --every 5
LOOM_MOE_LEAN_TILES=16 t moe-single-l16 150 $B/test_moe single
LOOM_MOE_LEAN_TILES=0 t moe-single-l0 150 $B/test_moe single
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
for r in 1 2 3; do
  for l in 4 0; do
    LOOM_MOE_LEAN_TILES=$l t dec-l$l-$r 40 $B/loom moe $D
    LOOM_MOE_LEAN_TILES=$l t qwen-l$l-$r 40 $B/loom moe $Q
  done
done
for tk in 1 128; do
  t tr$tk 30 $B/loom moe --gpus 1 --impl fused --tokens $tk --experts 64 --topk 8 --iters 5 --trace $OUT/tr$tk.json
  python3 bench/trace_stats.py $OUT/tr$tk.json > $OUT/tr$tk.txt 2>&1
done
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/qwen-*; do echo "$(basename $f .log): $(grep -E 'phases end' $f | sed 's/.*median \([0-9.]*\) us.*phases end at/\1 |/' | tr '\n' ' ')"; done >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when" $f | cut -c1-400; done >> $S
pack; cat $S
