# Session 33 call 5 (nvidia-h200): the decode-sized one-weight GEMM on an H200 with split-K
# (w1 against w1+sk2 / w1+sk4: 64 tasks -> 128 / 256), each variant checked first; the
# small-M hg A/B once more.
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t dec_sk 200 $B/gemm --dtype bf16 --shape decode --variant w1,sk2,sk4 --iters 20
t sm_on 60 $B/gemm --dtype bf16 --shape smallm --variant w1 --iters 20
t sm_off 60 $B/gemm --dtype bf16 --shape smallm --variant w1 --iters 20 --hg-table off
pack
