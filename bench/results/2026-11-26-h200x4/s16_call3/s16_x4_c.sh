#!/bin/bash
# session 16, call 3 (4 GPUs): the all-reduce's publish with one fence;
# host time per call printed. Tests (loopback on GPU 3 beside the multi-GPU
# ones), then gemm-ar A/B/C: loom_base (d885fa7), loom_push (call 2), loom.
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
  for b in loom_base loom_push loom; do
    t ar-floor-$b-$rep 30 build/$b gemm-ar $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
    t ar-mk4-$b-$rep 30 build/$b gemm-ar $C --iters 50 --tokens 4096 --hidden 256 --ffn 4096
    t ar-mk8-$b-$rep 30 build/$b gemm-ar $C --iters 50 --tokens 8192 --hidden 512 --ffn 8192
    t ar-mk16-$b-$rep 30 build/$b gemm-ar $C --iters 50 --tokens 16384 --hidden 1024 --ffn 16384
  done
done
t ar-llama-new 60 build/loom gemm-ar $C --iters 20 --warmup 5 --tokens 4096,16384 --hidden 8192 --ffn 28672
t rs-floor 30 build/loom gemm-rs $C --iters 100 --warmup 10 --tokens 256 --hidden 128 --ffn 256
t rs-mk4 30 build/loom gemm-rs $C --iters 50 --tokens 4096 --hidden 256 --ffn 4096
t ag-floor 30 build/loom ag-gemm $C --iters 100 --warmup 10 --tokens 64 --hidden 128 --ffn 256
t ag-mk4 30 build/loom ag-gemm $C --iters 50 --tokens 1024 --hidden 4096 --ffn 4096
t moe-4k 30 build/loom moe --gpus $N --tokens 4096,16384 --iters 20
t moe-dec 30 build/loom moe --gpus $N --tokens 1,128 --experts 64 --topk 8 --iters 50
for f in $OUT/ar-*.log $OUT/rs-*.log $OUT/ag-*.log $OUT/moe-*.log; do echo "$(basename $f .log): $(grep -E '^ +[0-9]+ (fused|baseline)' $f | awk '{printf "%s %s %s | ", $1, $2, $3}')"; done >> $S
grep -h "host .* us a call" $OUT/*.log | sed 's/^ *//' | cut -c1-200 >> $OUT/host.txt
pack; cat $S
