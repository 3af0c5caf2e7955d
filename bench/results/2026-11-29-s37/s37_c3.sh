# Session 37 call 3 (nvidia-h200): does the MoE head run from code cached by the previous
# launch? Scratch build (icache_x.diff on 18e3152): LOOM_X_MODE=1 / 2 launch a 256 / 16 KB
# straight-line evictor kernel before every MoE launch; 3 launches the same kernel with T = 0
# first (the head's code warm, the experts' not). Phase ends from the CLI (last iteration).
source scratch/dev_env.sh
B=scratch/bin
for r in 1 2 3; do
  for m in 0 1 2 3; do
    LOOM_X_MODE=$m t m$m-$r 40 $B/loom_x moe --gpus 1 --impl fused --tokens 1,16,128 --experts 64 --topk 8 --iters 30
  done
done
for m in 0 1 3; do
  LOOM_X_MODE=$m t tr-m$m 30 $B/loom_x moe --gpus 1 --impl fused --tokens 1 --experts 64 --topk 8 --iters 5 --trace $OUT/tr1-m$m.json
  python3 bench/trace_stats.py $OUT/tr1-m$m.json > $OUT/tr1-m$m.txt 2>&1
done
gzip $OUT/*.json
for f in $OUT/logs/m*; do echo "$(basename $f .log): $(grep -E 'phases end' $f | sed 's/.*median \([0-9.]*\) us.*phases end at/\1 |/' | tr '\n' ' ')"; done >> $S
for f in $OUT/tr*.txt; do echo "$(basename $f)"; grep -E "when" $f | cut -c1-400; done >> $S
pack; cat $S
