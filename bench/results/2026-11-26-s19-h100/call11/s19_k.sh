#!/bin/bash
# session 19 call 11 (x1): diagnostic: GEMM0 slices with the dispatch all in the foreground (LOOM_MOE_FG=64:
# no background copy beside the GEMMs) against the default (local expert 0's pieces up front, the rest beside)
source scratch/dev_env.sh
DEADLINE=200
for v in 1 64; do
  t fg$v 30 env LOOM_MOE_FG=$v scratch/bin/loom moe --gpus 1 --impl fused --tokens 16384 --iters 10 --trace $OUT/tr_fg$v.json
  t fg$v-4096 30 env LOOM_MOE_FG=$v scratch/bin/loom moe --gpus 1 --impl fused --tokens 4096 --iters 10 --trace $OUT/tr4k_fg$v.json
done
for f in $OUT/tr*.json; do python3 bench/trace_stats.py $f > ${f%.json}.txt 2>&1; done
rm -f $OUT/*.json
for f in $OUT/*.log; do n=$(basename $f .log); echo "$n: $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{print $1" "$2" "$3}' | tr '\n' ' ') | $(grep -o 'phases end at.*' $f | tr '\n' ' ')" >> $S; done
pack
cat $S
