# Session 47 call 9 (nvidia-h200): the experts-fit count without its rounding to a multiple of 4
# (review fix): the message's count must run and one more must be refused; test_faults again.
DEADLINE=200
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
for e in 1024 911 910; do
  t moe$e 25 $B/loom moe --gpus 1 --impl fused --tokens 512 --experts $e --topk 8 --ffn 256 --hidden 1024 --iters 3 --check-tokens 32
done
t test_faults_loopback 120 $B/test_faults loopback
for f in $OUT/moe*.log; do echo "== $(basename $f .log)"; grep -E "verify|median|invalid" $f | cut -c1-300; done >> $S
grep -E "config/experts|test_faults" $OUT/test_faults_loopback.log >> $S
pack; cat $S
