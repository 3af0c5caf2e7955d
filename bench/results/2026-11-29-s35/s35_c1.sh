# Session 35 call 1 (nvidia-h200): the MoE decode head at one rank on an H200, before any change
# (main 4011152): the decode points fused beside the baseline, and traces at T = 1, 128, 512
# (E = 64, k = 8) to see the gate, its finisher and place.
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
s=$SECONDS; make -j16 build/loom > $OUT/logs/build.log 2>&1; echo "build rc=$? $((SECONDS-s))s" >> $S
B=build
t dec-both 90 $B/loom moe --gpus 1 --impl both --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
for T in 1 128 512; do
  t tr$T 40 $B/loom moe --gpus 1 --impl fused --tokens $T --experts 64 --topk 8 --iters 5 --trace $OUT/tr$T.json
  python3 bench/trace_stats.py $OUT/tr$T.json > $OUT/tr$T.txt 2>&1
done
t grid-both 90 $B/loom moe --gpus 1 --impl both --tokens 4096,16384 --iters 20
gzip $OUT/*.json
for f in $OUT/logs/*-both.log; do echo "== $(basename $f .log)"; grep -E "^ +[0-9]+ (fused|baseline)" $f; done >> $S
for T in 1 128 512; do echo "== tr$T"; head -20 $OUT/tr$T.txt | cut -c1-400; done >> $S
pack; cat $S
