# Session 34 call 3 (nvidia-h200; no 2-GPU machine was lent at this point): the GPU tests on
# this tree's binaries (call 2's test binaries were last session's: `make` does not rebuild the
# tests; these come from `make test`): test_collective single (R = 1) and loopback (2, 4, 8
# ranks on one GPU, the {13, ..} shape's swapped tiles with tagged stores and replicas among
# them), test_faults / test_moe / test_sequence loopback.
source scratch/dev_env.sh
DEADLINE=${DEADLINE:-570}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t coll-single 40 $B/test_collective single
t coll-loop 300 $B/test_collective loopback
t faults-loop 40 $B/test_faults loopback
t moe-loop 60 $B/test_moe loopback
t seq-loop 60 $B/test_sequence loopback
grep -h "cases (three\|R=.*done" $OUT/logs/coll-*.log >> $S
pack; cat $S
