# Session 39 call 6 (nvidia-h200): call 4's build (2ad3717), ncu per-instruction counts of one
# moe_kernel launch at decode T = 1, E = 64 k = 8 and Mixtral-like: the lines a decode call
# executes with the swapped tile (session 37's count at T = 1 was 1090; bench/ncu_lines.py).
source scratch/dev_env.sh
B=scratch/bin
t ncu-t1 120 ncu --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
  --section WarpStateStats --section SourceCounters \
  -f -o $OUT/ncu_t1 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 64 --topk 8 --iters 3
ncu -i $OUT/ncu_t1.ncu-rep --page source --csv --print-source sass > $OUT/ncu_t1_sass.csv 2> $OUT/ncu_t1.err
t ncu-mix 120 ncu --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
  --section WarpStateStats --section SourceCounters \
  -f -o $OUT/ncu_mix $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 3
ncu -i $OUT/ncu_mix.ncu-rep --page source --csv --print-source sass > $OUT/ncu_mix_sass.csv 2> $OUT/ncu_mix.err
rm -f $OUT/*.ncu-rep
gzip $OUT/*.csv
pack; cat $S
