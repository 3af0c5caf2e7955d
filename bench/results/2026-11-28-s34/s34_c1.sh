# Session 34 call 1 (nvidia-h200): the swapped decode tile's epilogue through shared memory
# (every epilogue of the 64 x 128 tile, SwiGLU included) and the collectives taking it for
# groups of <= 16 rows. Engine checks and timings (dec2 against w1, and against session 33's
# element-wise epilogue: call 9), the collective tests at one rank, then the decode points at
# one rank, the swapped tile (automatic) beside the 64 x 128 one (LOOM_AG_TILE=dec64).
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t check_dec 150 $B/gemm --check-only --variant w1,dec2
t dec_time 100 $B/gemm --dtype bf16 --shape decode --variant w1,dec2 --iters 20
t sm_time 60 $B/gemm --dtype bf16 --shape smallm --variant w1,dec2 --iters 20
t coll-single 60 $B/test_collective single
grep -h "all results match\|bad)" $OUT/logs/check_dec.log | grep -v " 0 bad" | head -20 >> $S
L="--gpus 1 --check-tokens 16 --iters 60 --warmup 10 --hidden 8192 --ffn 7168"
for r in 1 2; do
  for tok in 1 16; do
    for op in gemm-rs gemm-ar ag-gemm; do
      t $op$tok-sw-$r 40 $B/loom $op --impl both $L --tokens $tok
      LOOM_AG_TILE=dec64 t $op$tok-64-$r 40 $B/loom $op --impl fused $L --tokens $tok
    done
  done
done
for f in $OUT/logs/*-[12].log; do echo "$(basename $f .log): $(grep -E '(fused|baseline) +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/;s/.*baseline *median \([0-9.]*\) us.*/base \1/' | cut -c1-90 | tr '\n' ' ')"; done >> $S
pack; cat $S
