#!/bin/bash
# session 16, call 5 (4 GPUs): evidence for the next levers, no code change.
# (1) the engine's plain GEMM on 1 GPU at the per-rank GEMM shapes of the
#     reduce-scatter points; (2) the reduce-scatter / all-reduce with every
#     partial stored into the LOCAL window instead of the owner's (probe
#     binary build/loom_probe = b9cff0e + LOOM_PROBE_LOCAL_PARTIALS in
#     rs_launch + LOOM_PROBE_NO_VERIFY in the CLI; wrong results, timing
#     only) beside the real one; (3) the MoE gate's phase end against the
#     expert count on 1 GPU.
source scratch/dev_env.sh
C="--check-tokens 16 --launch threads"
t g1-mk4 30 build/loom gemm-rs --gpus 1 $C --iters 50 --tokens 4096 --hidden 256 --ffn 1024
t g1-mk16 30 build/loom gemm-rs --gpus 1 $C --iters 50 --tokens 16384 --hidden 1024 --ffn 4096
t g1-llama 40 build/loom gemm-rs --gpus 1 $C --iters 20 --tokens 16384 --hidden 8192 --ffn 7168
for rep in 1 2; do
  t rs-mk4-real-$rep 30 build/loom gemm-rs --gpus 4 $C --iters 50 --tokens 4096 --hidden 256 --ffn 4096 --impl fused
  t rs-mk4-local-$rep 30 env LOOM_PROBE_LOCAL_PARTIALS=1 LOOM_PROBE_NO_VERIFY=1 build/loom_probe gemm-rs --gpus 4 $C --iters 50 --tokens 4096 --hidden 256 --ffn 4096 --impl fused
  t rs-mk16-real-$rep 30 build/loom gemm-rs --gpus 4 $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384 --impl fused
  t rs-mk16-local-$rep 30 env LOOM_PROBE_LOCAL_PARTIALS=1 LOOM_PROBE_NO_VERIFY=1 build/loom_probe gemm-rs --gpus 4 $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384 --impl fused
done
t rs-llama-real 40 build/loom gemm-rs --gpus 4 $C --iters 20 --tokens 16384 --hidden 8192 --ffn 28672 --impl fused
t rs-llama-local 40 env LOOM_PROBE_LOCAL_PARTIALS=1 LOOM_PROBE_NO_VERIFY=1 build/loom_probe gemm-rs --gpus 4 $C --iters 20 --tokens 16384 --hidden 8192 --ffn 28672 --impl fused
t ar-mk16-real 30 build/loom gemm-ar --gpus 4 $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384 --impl fused
t ar-mk16-local 30 env LOOM_PROBE_LOCAL_PARTIALS=1 LOOM_PROBE_NO_VERIFY=1 build/loom_probe gemm-ar --gpus 4 $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384 --impl fused
for e in 8 16 32 64; do
  t gate-e$e 30 build/loom moe --gpus 1 --tokens 16384 --experts $e --iters 10 --impl fused --check-tokens 16
done
t gate-e32-t4k 30 build/loom moe --gpus 1 --tokens 4096 --experts 32 --iters 10 --impl fused --check-tokens 16
for f in $OUT/*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at/\1 us |/' | tr '\n' ' ')"; done >> $S
pack; cat $S
