# Session 33 call 8 (nvidia-h200): the swapped decode tile (hop_dec, variant dec): every small-config
# check in every dtype and groups mode, then decode and small-M timings beside w1 / w1+sk2 and cuBLAS.
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t check_dec 150 $B/gemm --check-only --variant dec
t dec_time 150 $B/gemm --dtype bf16 --shape decode --variant w1,sk2,dec --iters 20
t sm_time 100 $B/gemm --dtype bf16 --shape smallm --variant w1,dec --iters 20
grep -h "bad)\|FAIL\|error\|mismatch" $OUT/logs/check_dec.log | grep -v " 0 bad" | head -20 >> $S
grep -c " 0 bad" $OUT/logs/check_dec.log >> $S
pack
