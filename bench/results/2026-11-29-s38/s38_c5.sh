# Session 38 call 5 (nvidia-h200): the kept state (kernel as at 38f6df8; split K reverted) with
# test_moe's new decode family: GPU tests at 1 GPU and loopback's special cases (R = 2, 4, 8).
source scratch/dev_env.sh
B=scratch/bin
t moe-single 150 $B/test_moe single
t moe-loop-special 120 $B/test_moe loopback --special
pack; cat $S
