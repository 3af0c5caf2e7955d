# Session 47 call 4 (nvidia-h200). Carried (scratch/carry.tar.xz, stripped; extracted into scratch/):
# loom_e = 28f967b; probes (probe_*.diff, results wrong, verify ignored): loom_n0b = GEMM0's
# direct stores dropped with their values kept live (activation, conversion, transpose still run:
# call 3's n0 let the compiler drop them too); loom_prnb = n0b plus the signaler's row bulk copies
# of each GEMM0 tile from shared memory (a GEMM0 epilogue drained by copies, without its staging
# writes); loom_pr1 = the row copies for GEMM1 only, beside its direct stores (where call 1's
# +17.5% came from); loom_n1b = GEMM1's direct stores dropped, values kept live.
DEADLINE=300
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t moe908-e 25 $B/loom_e moe --gpus 1 --impl fused --tokens 512 --experts 908 --topk 8 --ffn 256 --hidden 1024 --iters 5 --check-tokens 64
t moe912-e 25 $B/loom_e moe --gpus 1 --impl fused --tokens 512 --experts 912 --topk 8 --ffn 256 --hidden 1024 --iters 5 --check-tokens 64
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 4"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
export LOOM_PROBE_NOVERIFY=1
for r in 1 2; do
  for v in e n0b prnb pr1 n1b; do t pre-$v-$r 25 $B/loom_$v moe $P; done
  for v in e n0b prnb pr1 n1b; do t qwen-$v-$r 25 $B/loom_$v moe $Q; done
done
unset LOOM_PROBE_NOVERIFY
for f in $OUT/pre-*.log $OUT/qwen-*.log; do echo "$(basename $f .log): $(grep -c 'verify: ok' $f) ok; $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
