# Session 48 call 3 (nvidia-h200): the final tree's library (device code = c8562d4's, comments
# only since): the multi-rank loopback tests, the faults, memcheck of the fused layer, the README job.
DEADLINE=560
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t moe_loop 220 $B/test_moe loopback --every 7
t faults_loop 130 $B/test_faults loopback
t faults_single 60 $B/test_faults single
t memcheck 120 compute-sanitizer --report-api-errors no --tool memcheck $B/loom moe --gpus 1 --impl fused --tokens 1,128,4096 --iters 2 --check-tokens 8
t readme 60 $B/loom moe
grep -E "ERROR SUMMARY|verify" $OUT/memcheck.log | head -8 >> $S
grep -E "verify|median" $OUT/readme.log | cut -c1-220 >> $S
pack; cat $S
