# Session 35 call 2 (nvidia-h200): gate jobs (each warp's part of a gate unit a job of its own,
# flags instead of an arrival counter) against the gate without them (LOOM_MOE_GATE_JOBS=0, the
# code of main 4011152) at one rank: the MoE GPU tests (single, loopback) on the new library,
# the decode points alternating off / on, traces at T = 1 and 128 of both, the large-T points
# once each (no jobs there: must be level).
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t moe-single 150 $B/test_moe single --every 3
t moe-loop 120 $B/test_moe loopback --every 7
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
for r in 1 2; do
  LOOM_MOE_GATE_JOBS=0 t dec-off-$r 40 $B/loom moe $D
  t dec-on-$r 40 $B/loom moe $D
done
for v in off on; do
  [ $v = off ] && export LOOM_MOE_GATE_JOBS=0 || unset LOOM_MOE_GATE_JOBS
  for T in 1 128; do
    t tr$T-$v 30 $B/loom moe --gpus 1 --impl fused --tokens $T --experts 64 --topk 8 --iters 5 --trace $OUT/tr${T}_$v.json
    python3 bench/trace_stats.py $OUT/tr${T}_$v.json > $OUT/tr${T}_$v.txt 2>&1
  done
done
unset LOOM_MOE_GATE_JOBS
t both-dec 60 $B/loom moe --gpus 1 --impl both --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
LOOM_MOE_GATE_JOBS=0 t grid-off 60 $B/loom moe --gpus 1 --impl fused --tokens 4096,16384 --iters 20
t grid-on 60 $B/loom moe --gpus 1 --impl fused --tokens 4096,16384 --iters 20
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/grid-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
grep -E "^ +[0-9]+ (fused|baseline)" $OUT/logs/both-dec.log >> $S
for f in $OUT/tr*.txt; do echo "== $f"; grep -E "when|gate|place|wait barrier" $f | cut -c1-300 | head -8; done >> $S
pack; cat $S
