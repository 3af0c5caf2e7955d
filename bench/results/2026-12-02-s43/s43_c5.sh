# Session 43 call 5 (nvidia-h200): the MoE config hash over the capacity factor's exact
# bits (host only): the fault tests (config mismatch among them), the loopback and single
# test families, one timing.
DEADLINE=240
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t faults-loop 60 $B/test_faults loopback
t moe-loop-special 80 $B/test_moe loopback --special
t moe-single 100 $B/test_moe single
t pre 20 $B/loom moe --gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 8
pack; cat $S
