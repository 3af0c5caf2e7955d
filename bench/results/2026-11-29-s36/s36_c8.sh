# Session 36 call 8 (nvidia-h200): does the small-M stream scale with the weight bytes in
# flight? bench/gemm small-M with the 64 x 128 tile (w1, 8 stages) and the swapped tile
# (dec2, 11 stages) on 32 / 64 / 96 / 132 SMs (3da3555's engine, unchanged since).
source scratch/dev_env.sh
B=scratch/bin
for s in 32 64 96 132; do
  t sm-$s 60 $B/gemm --dtype bf16 --shape smallm --variant w1,dec2 --sms $s --iters 20
done
for f in $OUT/logs/sm-*; do echo "== $f"; grep -E "small-M" $f | head -20; done >> $S
pack; cat $S
