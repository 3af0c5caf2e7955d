# Session 47 call 8 (nvidia-h200): HEAD's device code (loom_e = 28f967b = ce745e8's) on real
# model shapes at one GPU, fused beside the in-binary baseline: how much of each layer the gate is.
DEADLINE=420
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
B=scratch/bin
t dsv3 150 $B/loom_e moe --gpus 1 --impl both --tokens 128,4096 --experts 256 --topk 8 --hidden 7168 --ffn 2048 --act swiglu --iters 5 --check-tokens 16
t q235 90 $B/loom_e moe --gpus 1 --impl both --tokens 128,4096 --experts 128 --topk 8 --hidden 4096 --ffn 1536 --act swiglu --iters 5 --check-tokens 16
t mixtral 90 $B/loom_e moe --gpus 1 --impl both --tokens 128,4096 --experts 8 --topk 2 --hidden 4096 --ffn 14336 --act swiglu --iters 5 --check-tokens 16
t grid 60 $B/loom_e moe --gpus 1 --impl both --tokens 4096,16384 --iters 10 --check-tokens 8
for f in $OUT/*.log; do echo "== $(basename $f .log)"; grep -E "verify|median|phases" $f | cut -c1-260; done >> $S
pack; cat $S
