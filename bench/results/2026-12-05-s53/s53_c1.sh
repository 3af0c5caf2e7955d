# Session 53 call 1 (nvidia-h200, or nvidia-h100-x1 if refused): the gate's counter as atomicMax +
# atomicAdd (no CAS loop) and no split-mode ticket when units <= blocks, against the old binaries
# (scratch/old = 77c95e1's code, session 52's) on the same card. test_moe single with the new
# binaries; the T sweep across the split range (E = 32: T in (1056, 2112]; E = 128: (512, 2112]),
# old and new alternately, two rounds; every token of T = 2048 (both gates) and Qwen3 T = 2048
# checked; compute-sanitizer memcheck of one split-path call.
DEADLINE=${DEADLINE:-540}
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
N=scratch/bin; O=scratch/old/bin
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
t test_moe 160 $N/test_moe single
A="--gpus 1 --impl fused --tokens 1024,1536,2048,2560,3072,4096 --iters 20 --check-tokens 8"
Q="--gpus 1 --impl fused --tokens 512,1024,2048,4096 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
for r in 1 2; do
  for v in old new; do
    [ $v = old ] && B=$O || B=$N
    t sw_${v}_$r 40 $B/loom moe $A --gate fast
    t q_${v}_$r 40 $B/loom moe $Q --gate fast
  done
done
t sw_exact_old 40 $O/loom moe $A --gate exact
t sw_exact_new 40 $N/loom moe $A --gate exact
t fc2048f 60 $N/loom moe --gpus 1 --tokens 2048 --iters 2 --check-tokens 2048 --gate fast
t fc2048e 60 $N/loom moe --gpus 1 --tokens 2048 --iters 2 --check-tokens 2048 --gate exact
t fcq2048 60 $N/loom moe --gpus 1 --tokens 2048 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 2 --check-tokens 2048 --gate fast --dtype fp16
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
t memcheck 90 $SAN --tool memcheck $N/loom moe --gpus 1 --impl fused --tokens 2048 --iters 1 --warmup 1 --check-tokens 4
for f in $OUT/sw_* $OUT/q_*; do echo "== $(basename $f .log)"; grep -E "median" $f | grep fused | sed 's/TFLOP.*phases end at/| /' | cut -c1-200; grep -c "verify: ok" $f; done >> $S
grep -h -E "verify|error|FAIL" $OUT/fc*.log | cut -c1-300 | head -20 >> $S
grep -h -E "ERROR SUMMARY|verify" $OUT/memcheck.log | head -5 >> $S
pack; cat $S
