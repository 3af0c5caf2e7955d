# Session 45 call 10 (nvidia-h200): the epilogue probes again, correctly linked this time
# (calls 2, 6, 8 and 9 ran probe binaries whose link had left HEAD's moe.o in libloom.a: they
# were HEAD, and verified). loom_p1 = no 16-bit epilogue stores, (loom_p2, no quad transposes, left out: the carry limit),
# loom_p3 = no 16-bit epilogue at all (results wrong: probe harness, LOOM_PROBE_NOVERIFY),
# against loom_e (HEAD 6054f26), alternating; relu / gelu for e and p3; traces of e and p3.
DEADLINE=300
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
export LOOM_PROBE_NOVERIFY=1
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 4"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
for r in 1 2; do
  for v in e p1 p3; do t pre-$v-$r 20 $B/loom_$v moe $P; done
  for v in e p1 p3; do t qwen-$v-$r 20 $B/loom_$v moe $Q; done
done
for a in relu gelu; do for v in e p3; do t $a-$v 20 $B/loom_$v moe --gpus 1 --impl fused --tokens 16384 --iters 10 --check-tokens 4 --act $a; done; done
for v in e p3; do t tr-$v 30 $B/loom_$v moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 4 --trace $OUT/tr$v.json; done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/*.log; do echo "$(basename $f .log): $(grep -c 'verify: FAILED' $f) failed verify; $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
