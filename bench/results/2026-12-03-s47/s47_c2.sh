# Session 47 call 2 (nvidia-h200). Carried (scratch/carry.tar.xz): loom_e = HEAD (cb9b545),
# loom_pb = call 1's probe (the signaler bulk-copies each task's rows again and waits for them
# before task_done), loom_pb2 = the same copies, the signaler not waiting for them (wait_group 8:
# up to 8 tasks' copies in flight; probe2.diff): whether the probe's cost is the copies' traffic
# or the signal they delay. Then HEAD on E = 1024 / 512 (call 1's E = 1024 failed on loom_sm).
DEADLINE=400
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 4"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
export LOOM_PROBE_NOVERIFY=1
for r in 1 2; do
  for v in e pb pb2; do t pre-$v-$r 25 $B/loom_$v moe $P; done
  for v in e pb pb2; do t qwen-$v-$r 25 $B/loom_$v moe $Q; done
done
unset LOOM_PROBE_NOVERIFY
t moe1k-e 25 $B/loom_e moe --gpus 1 --impl fused --tokens 512 --experts 1024 --topk 8 --ffn 256 --hidden 1024 --iters 5 --check-tokens 64
t moe512-e 25 $B/loom_e moe --gpus 1 --impl fused --tokens 512 --experts 512 --topk 8 --ffn 256 --hidden 1024 --iters 5 --check-tokens 64
for f in $OUT/pre-*.log $OUT/qwen-*.log; do echo "$(basename $f .log): $(grep -c 'verify: ok' $f) ok; $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
