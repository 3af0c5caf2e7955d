#!/bin/bash
# session 31, call 7 (4x H100): what the GEMM1 epilogue's NVLink stores cost the MoE layer at large T
# (docs/moe_v2.md "GEMM1's return staged in the dispatch region", measure a local-only version first).
# loom_plocal is a probe build (MOE_PROBE_LOCAL, not for landing): GEMM1's rows go into this rank's own
# window instead of their sources' (results wrong, so LOOM_PROBE_NOVERIFY skips the check for both).
source scratch/dev_env.sh
B=scratch/bin
export LOOM_PROBE_NOVERIFY=1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
for r in 1 2; do for v in loom loom_plocal; do
  t grid-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 4096,8192,16384 --iters 20
  t qwen-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
done; done
for v in loom loom_plocal; do
  t tr-$v 40 $B/$v moe --gpus 4 --impl fused --tokens 16384 --iters 5 --trace $OUT/tr16k_$v.json
  python3 bench/trace_stats.py $OUT/tr16k_$v.json > $OUT/tr16k_$v.txt 2>&1
done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/logs/grid-* $OUT/logs/qwen-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
for v in loom loom_plocal; do echo "== $v"; grep -E "GEMM0|GEMM1|combine|wait return|when" $OUT/tr16k_$v.txt | cut -c1-300; done >> $S
pack; cat $S
