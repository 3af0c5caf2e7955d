# Session 42 call 1 (nvidia-h200): measurements on HEAD (6ab385f), no library change.
# Where the gate's time goes at prefill: a trace (gate slices per tile) and the probe
# build's finish stamps (103: top-k + weights, 104: counts), then ncu per-instruction
# warp samples of one moe_kernel launch at T = 16384 (E = 32, k = 2) and the Qwen3 shape
# at T = 8192, attributed to source functions here (bench/ncu_lines.py --by func).
DEADLINE=330
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
P="--gpus 1 --impl fused --iters 10 --check-tokens 16"
t tr16k 40 $B/loom moe $P --tokens 16384 --trace $OUT/tr16k.json
t pr16k 40 $B/loom_probe moe $P --tokens 16384,4096 --trace $OUT/pr.json
t prq 40 $B/loom_probe moe $P --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --trace $OUT/prq.json
t prd 40 $B/loom_probe moe --gpus 1 --impl fused --iters 20 --check-tokens 16 --tokens 1,128 --experts 64 --topk 8 --trace $OUT/prd.json
t ncu16k 120 $NCU --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
   --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis -o $OUT/n16k \
   $B/loom moe --gpus 1 --impl fused --iters 1 --warmup 2 --check-tokens 4 --tokens 16384
t ncuq 120 $NCU --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
   --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis -o $OUT/nq \
   $B/loom moe --gpus 1 --impl fused --iters 1 --warmup 2 --check-tokens 4 --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu
for r in n16k nq; do
  [ -f $OUT/$r.ncu-rep ] && $NCU -i $OUT/$r.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/${r}_sass.csv.gz
  [ -f $OUT/$r.ncu-rep ] && $NCU -i $OUT/$r.ncu-rep --page details --csv 2>/dev/null > $OUT/${r}_details.csv
done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/tr16k.log $OUT/pr16k.log $OUT/prq.log $OUT/prd.log; do echo "$(basename $f .log): $(grep -E 'fused +median|phases end' $f | cut -c1-220 | tr '\n' ' ')"; done >> $S
rm -f $OUT/*.ncu-rep
pack; cat $S
