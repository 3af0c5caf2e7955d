# Session 39 call 4 (nvidia-h200): call 3's build with the expert phase's ticket total counting the
# GEMM1 K shares (call 3 hung at the bounded wait: test_moe's decode case 6002 failed at once) --
# tests, memcheck of a split run, then loom_head (8bf315f) / loom / loom with LOOM_MOE_SPLIT=0 on the
# Mixtral-like decode, three rounds; one round of the other shapes; --impl both; a Mixtral T = 1 trace.
DEADLINE=500
source scratch/dev_env.sh
B=scratch/bin
t moe-single 120 $B/test_moe single
t moe-loop-special 100 $B/test_moe loopback --special
t memcheck 120 compute-sanitizer --report-api-errors no --tool memcheck $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 8 --topk 2 --hidden 1024 --ffn 4096 --act swiglu --iters 2
D="--gpus 1 --impl fused --tokens 1,16,128 --experts 64 --topk 8 --iters 40"
Q="--gpus 1 --impl fused --tokens 1,16,128 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 40"
M="--gpus 1 --impl fused --tokens 1,4,16 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20"
P="--gpus 1 --impl fused --tokens 4096 --iters 20"
for r in 1 2 3; do
  for b in loom_head loom loom0; do
    x=$b; e=""
    [ $b = loom0 ] && { x=loom; e="env LOOM_MOE_SPLIT=0"; }
    t mix-$b-$r 40 $e $B/$x moe $M
  done
done
t dec-loom-1 30 $B/loom moe $D
t qwen-loom-1 30 $B/loom moe $Q
t pre-loom-1 30 $B/loom moe $P
t mixboth 60 $B/loom moe --gpus 1 --impl both --tokens 1,4 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 20
t tracem 40 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 5 --trace $OUT/tm.json
t tracems 30 python3 bench/trace_stats.py $OUT/tm.json
for f in $OUT/logs/dec-* $OUT/logs/qwen-* $OUT/logs/mix-* $OUT/logs/pre-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ') | $(grep -o 'phases end at.*' $f | head -1)"; done >> $S
grep -E "^ +[0-9]+ (fused|baseline)" $OUT/logs/mixboth.log >> $S
pack; cat $S
