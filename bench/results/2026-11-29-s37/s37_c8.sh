# Session 37 call 8 (nvidia-h200): 21b86f6's build (the epilogue skip), ncu per-instruction
# counts of one moe_kernel launch at T = 1: the lines a decode call executes now (next
# session's baseline for the code-footprint work, docs/moe_v2.md "Session 37").
source scratch/dev_env.sh
B=scratch/bin
t ncu-t1 120 ncu --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
  --section WarpStateStats --section SourceCounters \
  -f -o $OUT/ncu_t1 $B/loom moe --gpus 1 --impl fused --tokens 1 --experts 64 --topk 8 --iters 3
ncu -i $OUT/ncu_t1.ncu-rep --page source --csv --print-source sass > $OUT/ncu_t1_sass.csv 2> $OUT/ncu_t1.err
rm -f $OUT/*.ncu-rep
gzip $OUT/*.csv
pack; cat $S
