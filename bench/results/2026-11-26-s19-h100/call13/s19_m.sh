#!/bin/bash
# session 19 call 13 (x1): diagnostic: GEMM0 slices by activation (relu / silu / gelu), 701c2b5
source scratch/dev_env.sh
DEADLINE=150
for a in relu silu gelu; do
  t tr-$a 25 scratch/bin/loom_base moe --gpus 1 --impl fused --tokens 16384 --act $a --iters 10 --trace $OUT/tr_$a.json
done
for f in $OUT/tr_*.json; do python3 bench/trace_stats.py $f > ${f%.json}.txt 2>&1; done
rm -f $OUT/*.json
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ')" >> $S; done
for f in $OUT/tr_*.txt; do echo "$(basename $f): $(grep -E '^  GEMM[01] ' $f | awk '{print $1" "$3}' | tr '\n' ' ')" >> $S; done
pack
cat $S
