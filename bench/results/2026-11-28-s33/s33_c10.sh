# Session 33 call 10 (2 GPUs): the operators' GPU tests on b745861's binaries (the engine's
# shared code changed under them: the host-group table, hop_cfg's TM / TN / a_box_rows,
# if constexpr in the consumers), multi-process and one-process.
source scratch/dev_env.sh
DEADLINE=${DEADLINE:-175}
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
t coll-multi 60 $B/test_collective multi
t moe-multi 50 $B/test_moe multi --every 7
t faults-multi 25 $B/test_faults multi
t coll-single 40 $B/test_collective single
pack; cat $S
