# Session 47 call 5 (nvidia-h200). Carried (scratch/, stripped): loom_e = 28f967b, loom_hC = GEMM0's
# h stores with an L2 evict_last policy (probe_hC.diff; results correct, verified). Timing e vs hC,
# then ncu's DRAM bytes of one moe_kernel launch for both (T = 16384 and the Qwen3 shape): how far
# the layer's memory traffic is from its compulsory bytes.
DEADLINE=330
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 4"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
for r in 1 2; do
  for v in e hC; do t pre-$v-$r 25 $B/loom_$v moe $P; done
  for v in e hC; do t qwen-$v-$r 25 $B/loom_$v moe $Q; done
done
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum
for v in e hC; do
  t ncu-pre-$v 60 ncu --clock-control none -k regex:moe_kernel -s 2 -c 1 --metrics $M $B/loom_$v moe --gpus 1 --impl fused --tokens 16384 --iters 1 --check-tokens 4
  t ncu-qwen-$v 60 ncu --clock-control none -k regex:moe_kernel -s 2 -c 1 --metrics $M $B/loom_$v moe --gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 1 --check-tokens 4
done
for f in $OUT/pre-*.log $OUT/qwen-*.log; do echo "$(basename $f .log): $(grep -c 'verify: ok' $f) ok; $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
for f in $OUT/ncu-*.log; do echo "$(basename $f .log):"; grep -E "dram__|lts__|gpu__time" $f; done >> $S
pack; cat $S
