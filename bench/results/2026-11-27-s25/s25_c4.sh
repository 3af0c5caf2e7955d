#!/bin/bash
# session 25, call 4 (4 GPUs, the binaries of call 3): issue 12's grid
# (bench/collective_grid.sh), alone on the machine.
source scratch/dev_env.sh
B=scratch/bin
mkdir -p build && cp $B/loom build/loom
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
t grid 420 bash bench/collective_grid.sh $OUT/grid 4
for f in $OUT/grid/*.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s | ", $1, $2, $3}')"; done >> $S
pack; cat $S
