# Session 47 call 3 (nvidia-h200). Carried (scratch/carry.tar.xz, stripped): loom_e = HEAD + the
# num_experts shared-memory check (this session's source change), its test_moe and test_sequence;
# four probes of GEMM0's epilogue drained by TMA (probe_*.diff, results wrong, verify ignored):
# loom_pt = the signaler adds 64-column tensor stores (a1's box, 128 rows) of each GEMM0 tile from
# shared memory before task_done, beside the direct stores; loom_pr = the same bytes as row bulk
# copies (call 1's pb for GEMM0 only); loom_n0 = GEMM0's direct stores dropped (activation kept);
# loom_ptn = n0 plus pt's tensor stores (a held-stage GEMM0 epilogue without its staging writes).
DEADLINE=420
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t moe1k-e 25 $B/loom_e moe --gpus 1 --impl fused --tokens 512 --experts 1024 --topk 8 --ffn 256 --hidden 1024 --iters 5 --check-tokens 64
t moe896-e 25 $B/loom_e moe --gpus 1 --impl fused --tokens 512 --experts 896 --topk 8 --ffn 256 --hidden 1024 --iters 5 --check-tokens 64
t moe512-e 25 $B/loom_e moe --gpus 1 --impl fused --tokens 512 --experts 512 --topk 8 --ffn 256 --hidden 1024 --iters 5 --check-tokens 64
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 4"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
export LOOM_PROBE_NOVERIFY=1
for r in 1 2; do
  for v in e pt pr n0 ptn; do t pre-$v-$r 25 $B/loom_$v moe $P; done
  for v in e pt pr n0 ptn; do t qwen-$v-$r 25 $B/loom_$v moe $Q; done
done
unset LOOM_PROBE_NOVERIFY
t test_moe_single 150 $B/test_moe single
t test_sequence_single 60 $B/test_sequence single
for f in $OUT/pre-*.log $OUT/qwen-*.log; do echo "$(basename $f .log): $(grep -c 'verify: ok' $f) ok; $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
