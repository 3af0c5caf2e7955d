# Session 49 call 5 (nvidia-h200): the final library (4275e65's device code): memcheck of the fused
# layer, the README job, test_sequence, fp32 (TF32) at T = 16384 and a DeepSeek-V3-like shape.
DEADLINE=300
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t memcheck 90 compute-sanitizer --report-api-errors no --tool memcheck $B/loom moe --gpus 1 --impl fused --tokens 1,128,4096 --iters 2 --check-tokens 8
t readme 60 $B/loom moe
t seq 100 $B/test_sequence single
t fp32 40 $B/loom moe --gpus 1 --impl both --dtype fp32 --tokens 16384 --iters 10 --check-tokens 4
t dsv3 60 $B/loom moe --gpus 1 --impl both --tokens 4096 --experts 256 --topk 8 --hidden 7168 --ffn 2048 --act swiglu --iters 5 --check-tokens 4
grep -E "ERROR SUMMARY|verify" $OUT/memcheck.log | head -8 >> $S
for f in readme fp32 dsv3; do echo "== $f"; grep -E "verify|median" $OUT/$f.log | cut -c1-230; done >> $S
pack; cat $S
