#!/bin/bash
# session 32, call 2 (4 GPUs): the stats fold at the kernel's end as a warp per phase (was one thread
# a phase reading every block's mark, ~33 dependent L2 round trips after the last combine), with the
# new phase_end_ns check in test_moe: the MoE GPU tests on 4 GPUs and in loopback worlds, issue 11's
# points against b6880c8 (loom_base), alternating, then the issue's points fused beside the baseline
# (grid, Qwen3, decode, fp32, 2-GPU scaling) and traces at decode T = 128 (both builds) and T = 16384.
source scratch/dev_env.sh
B=scratch/bin
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
t moe-multi 120 $B/test_moe multi --every 7
t faults-multi 60 $B/test_faults multi
t moe-loop 150 $B/test_moe loopback --every 7
t moe-single 150 $B/test_moe single --every 3
for r in 1 2; do for v in loom_base loom; do
  t grid-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 4096,8192,16384 --iters 20
  t qwen-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
  t dec-$v-$r 60 $B/$v moe --gpus 4 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40
done; done
M="$B/loom moe --gpus 4 --impl both"
t both-grid 60 $M --tokens 4096,8192,16384 --iters 20
t both-qwen 60 $M --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
t both-dec 60 $M --tokens 1,16,128,512 --experts 64 --topk 8 --iters 50
t both-fp32 60 $M --tokens 16384 --dtype fp32 --iters 10
t scale-2 60 $B/loom moe --gpus 2 --impl fused --tokens 8192 --iters 20
for v in loom_base loom; do
  t tr128-$v 40 $B/$v moe --gpus 4 --impl fused --tokens 128 --experts 64 --topk 8 --iters 5 --trace $OUT/tr128_$v.json
  python3 bench/trace_stats.py $OUT/tr128_$v.json > $OUT/tr128_$v.txt 2>&1
done
t tr16k 40 $B/loom moe --gpus 4 --impl fused --tokens 16384 --iters 5 --trace $OUT/tr16k.json
python3 bench/trace_stats.py $OUT/tr16k.json > $OUT/tr16k.txt 2>&1
python3 - $OUT/tr128_loom_base.json $OUT/tr128_loom.json >> $S 2>&1 <<'PY'
import json, sys
for f in sys.argv[1:]:
    ev = [e for e in json.load(open(f))['traceEvents'] if e.get('ph') == 'X']
    for pid in sorted({e['pid'] for e in ev}):
        E = [e for e in ev if e['pid'] == pid]
        k = [e for e in E if e['name'].startswith('moe_kernel')][0]
        last = max(e['ts'] + e['dur'] for e in E if not e['name'].startswith('moe_kernel'))
        print(f.split('/')[-1], 'GPU', pid, 'kernel', round(k['dur'], 1), 'us, after the last work slice',
              round(k['ts'] + k['dur'] - last, 1), 'us')
PY
gzip $OUT/*.json
for f in $OUT/logs/grid-* $OUT/logs/qwen-* $OUT/logs/dec-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
for f in $OUT/logs/both-*.log $OUT/logs/scale-2.log; do echo "== $(basename $f .log)"; grep -E "^ +[0-9]+ (fused|baseline)" $f; done >> $S
grep -E "GEMM0|GEMM1|combine|when|busy" $OUT/tr16k.txt | cut -c1-300 >> $S
pack; cat $S
