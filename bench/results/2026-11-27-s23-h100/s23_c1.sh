#!/bin/bash
# session 23, call 1 (1 GPU): the engine at decode sizes (bench/gemm --shape decode),
# the collective reduce-scatter's per-GPU decode shape at world size 1 by tile.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t gemm-decode 240 $B/gemm --dtype bf16 --shape decode --variant v1,w1,pp,sk2,sk4,sm2h --iters 20
D="--gpus 1 --check-tokens 16 --impl both --iters 50 --warmup 10 --hidden 8192 --ffn 14336"
for tok in 1 16 64 128; do
  for tile in narrow wide; do
    LOOM_AG_TILE=$tile t rs-$tok-$tile 40 $B/loom gemm-rs $D --tokens $tok
  done
done
for f in $OUT/logs/rs-*.log; do echo "$(basename $f .log): $(grep -E 'fused +median|baseline +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/' | sed 's/.*baseline *median \([0-9.]*\) us.*/BASE \1/' | cut -c1-110 | tr '\n' ' ')"; done >> $S
grep -E "decode|match|engine/cuBLAS" $OUT/logs/gemm-decode.log | grep -v "^  *decode.*ok" | head -80 >> $S
pack; cat $S
