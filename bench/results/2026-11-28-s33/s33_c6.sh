# Session 33 call 6 (nvidia-h200): the decode-sized one-weight GEMM with wider stages (sm2: 2 stages
# of 4 k-blocks, 512 contiguous bytes of every B row a request; sm2h: 4 of 2, 256 bytes) against w1
# (128 bytes) and w1+sk2, each checked first.
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t dec_wide 200 $B/gemm --dtype bf16 --shape decode --variant w1,sk2,sm2,sm2h --iters 20
t sm_wide 100 $B/gemm --dtype bf16 --shape smallm --variant w1,sm2,sm2h --iters 20
pack
