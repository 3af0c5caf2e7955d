# Session 47 call 1 (nvidia-h200). Three binaries built on the dev machine and carried
# (scratch/carry.tar.xz): loom_e = HEAD (cb9b545); loom_pb = the signaler bulk-store probe
# (probe.diff: before task_done the signaler bulk-copies each 128 x 256 task's output rows again,
# 512 B (GEMM1) / 256 B (SwiGLU GEMM0) a row from shared memory to the rows' real destinations,
# waits for them, then signals: the drain traffic of a held-stage epilogue added beside today's
# direct stores; garbage values, so verify fails and LOOM_PROBE_NOVERIFY=1 times it anyway);
# loom_sm = moe_shared's per-expert arrays moved to the end of dynamic shared memory, sized by E
# (the change under test), with its GPU tests.
DEADLINE=570
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 4"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
export LOOM_PROBE_NOVERIFY=1
for r in 1 2; do
  for v in e pb sm; do t pre-$v-$r 25 $B/loom_$v moe $P; done
  for v in e pb sm; do t qwen-$v-$r 25 $B/loom_$v moe $Q; done
done
unset LOOM_PROBE_NOVERIFY
t moe1k-sm 25 $B/loom_sm moe --gpus 1 --impl fused --tokens 512 --experts 1024 --topk 8 --ffn 256 --hidden 1024 --iters 5 --check-tokens 64
t t1-sm 25 $B/loom_sm moe --gpus 1 --impl fused --tokens 1,16 --experts 64 --topk 6 --ffn 1408 --hidden 2048 --act swiglu --iters 10 --check-tokens 16
for tt in "test_moe single" "test_faults single" "test_sequence single" "test_moe loopback --every 7" "test_faults loopback"; do
  n=$(echo $tt | tr ' ' '_' | tr -d -); t $n 150 $B/sm_$tt
done
for f in $OUT/pre-*.log $OUT/qwen-*.log; do echo "$(basename $f .log): $(grep -c 'verify: ok' $f) ok; $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
