# Session 39 call 3 (nvidia-h200): the swapped decode tile with its GEMM1 over K shares where its
# tasks fill at most half the grid (LOOM_MOE_SPLIT, default on) -- tests, memcheck, racecheck of the
# new and of 8bf315f's kernel on one small decode run (ceilings given, no cuBLAS), then loom_head
# (8bf315f) / loom / loom with LOOM_MOE_SPLIT=0 alternating (three rounds); T = 1 traces.
DEADLINE=560
source scratch/dev_env.sh
B=scratch/bin
t moe-single 120 $B/test_moe single
t moe-loop-special 100 $B/test_moe loopback --special
t memcheck 120 compute-sanitizer --report-api-errors no --tool memcheck $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 8 --topk 2 --hidden 1024 --ffn 4096 --act swiglu --iters 2
R="moe --gpus 1 --impl fused --tokens 4 --experts 16 --topk 2 --iters 1 --peak-tflops 989 --hbm-gbps 4800"
t racecheck 100 compute-sanitizer --report-api-errors no --tool racecheck $B/loom $R
t racecheck-head 100 compute-sanitizer --report-api-errors no --tool racecheck $B/loom_head $R
D="--gpus 1 --impl fused --tokens 1,16,128 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
M="--gpus 1 --impl fused --tokens 1,4,16 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
P="--gpus 1 --impl fused --tokens 4096 --iters 20"
for r in 1 2 3; do
  for b in loom_head loom loom0; do
    x=$b; e=""
    [ $b = loom0 ] && { x=loom; e="env LOOM_MOE_SPLIT=0"; }
    t dec-$b-$r 30 $e $B/$x moe $D
    t qwen-$b-$r 30 $e $B/$x moe $Q
    t mix-$b-$r 40 $e $B/$x moe $M
    [ $b = loom0 ] || t pre-$b-$r 30 $e $B/$x moe $P
  done
done
t mixboth 60 $B/loom moe --gpus 1 --impl both --tokens 1,4 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20
t tracem 40 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 5 --trace $OUT/tm.json
t tracems 30 python3 bench/trace_stats.py $OUT/tm.json
for f in $OUT/logs/dec-* $OUT/logs/qwen-* $OUT/logs/mix-* $OUT/logs/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ') | $(grep -o 'phases end at.*' $f | head -1)"; done >> $S
grep -h "RACECHECK SUMMARY\|Race reported" $OUT/logs/racecheck*.log | sort | uniq -c >> $S
pack; cat $S
