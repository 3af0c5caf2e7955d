# Session 44 call 3 (nvidia-h200): ncu per instruction (warp-state samples) of one moe_kernel
# launch of HEAD 1d5f753 at T = 16384 and on the Qwen3 shape, exported as the SASS source
# page, to see what the 128 x 256 consumers' epilogue (3.3-4.3 us of a ~24.5 us task in
# call 2's probe trace) waits on.
DEADLINE=330
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
t ncu16k 150 $NCU --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
   --section WarpStateStats --section SourceCounters -o $OUT/n16k \
   $B/loom_b moe --gpus 1 --impl fused --iters 1 --warmup 2 --check-tokens 4 --tokens 16384
t ncuq 150 $NCU --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
   --section WarpStateStats --section SourceCounters -o $OUT/nq \
   $B/loom_b moe --gpus 1 --impl fused --iters 1 --warmup 2 --check-tokens 4 --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu
for r in n16k nq; do
  [ -f $OUT/$r.ncu-rep ] && $NCU -i $OUT/$r.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/${r}_sass.csv.gz
  rm -f $OUT/$r.ncu-rep
done
ls -la $OUT >> $S
pack; cat $S
