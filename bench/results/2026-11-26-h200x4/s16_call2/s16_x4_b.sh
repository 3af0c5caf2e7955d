#!/bin/bash
# session 16, call 2 (4 GPUs): the all-reduce with pushed finished tiles.
# Tests (loopback on GPU 3 beside the multi-GPU tests), then A/B timing of
# gemm-ar against build/loom_base (d885fa7), both --launch threads.
source scratch/dev_env.sh
N=$(nvidia-smi -L | wc -l)
( CUDA_VISIBLE_DEVICES=3 timeout 240 ./build/tests/test_collective loopback > $OUT/coll-loop.log 2>&1; echo "coll-loop rc=$? | $(tail -1 $OUT/coll-loop.log)" > $OUT/loop_rc.txt ) &
LP=$!
t coll-multi 200 ./build/tests/test_collective multi
t seq-multi 90 ./build/tests/test_sequence multi
t faults-multi 90 ./build/tests/test_faults multi
wait $LP; cat $OUT/loop_rc.txt >> $S
C="--gpus $N --check-tokens 16 --launch threads"
for rep in 1 2; do
  for b in loom_base loom; do
    t ar-floor-$b-$rep 30 build/$b gemm-ar $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
    t ar-mk-$b-$rep 60 build/$b gemm-ar $C --iters 50 --tokens 4096,8192,16384 --hidden 256 --ffn 4096
  done
done
t ar-mk8-new 30 build/loom gemm-ar $C --iters 50 --tokens 8192 --hidden 512 --ffn 8192
t ar-mk16-new 30 build/loom gemm-ar $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
t ar-mk8-base 30 build/loom_base gemm-ar $C --iters 50 --tokens 8192 --hidden 512 --ffn 8192
t ar-mk16-base 30 build/loom_base gemm-ar $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
t ar-llama-new 60 build/loom gemm-ar $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
t ar-llama-base 60 build/loom_base gemm-ar $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
t rs-floor 30 build/loom gemm-rs $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
t dec-trace 40 build/loom moe --gpus $N --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/trace_dec128.json --impl fused
t dec1-trace 40 build/loom moe --gpus $N --tokens 1 --experts 64 --topk 8 --iters 5 --trace $OUT/trace_dec1.json --impl fused
gzip $OUT/*.json 2>/dev/null
for f in $OUT/ar-*.log $OUT/rs-*.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s | ", $1, $2, $3}')"; done >> $S
pack; cat $S
