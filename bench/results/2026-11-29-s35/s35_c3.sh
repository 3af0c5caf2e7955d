# Session 35 call 3 (nvidia-h200): gate jobs + top-k by rank for E <= 64 + the finisher's loads
# two items at once, one rank. Timed and traced with the probe build (-DMOE_HEAD_PROBE: the
# same code but for extra trace slices of the head's steps when --trace is given; only it
# and test_moe fit the carry): the MoE GPU tests (single, loopback), decode points with the
# jobs off / on, traces at T = 1 and 128 with the head's steps, large T once.
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
t moe-single 150 $B/test_moe single --every 3
t moe-loop 120 $B/test_moe loopback --every 7
D="--gpus 1 --impl fused --tokens 1,16,128,512 --experts 64 --topk 8 --iters 40"
for r in 1 2; do
  LOOM_MOE_GATE_JOBS=0 t dec-off-$r 40 $B/loom_probe moe $D
  t dec-on-$r 40 $B/loom_probe moe $D
done
for T in 1 128 512; do
  t tr$T 30 $B/loom_probe moe --gpus 1 --impl fused --tokens $T --experts 64 --topk 8 --iters 5 --trace $OUT/tr$T.json
done
t grid-on 60 $B/loom_probe moe --gpus 1 --impl fused --tokens 4096,16384 --iters 20
t qwen-on 60 $B/loom_probe moe --gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 20
python3 - $OUT/tr1.json $OUT/tr128.json $OUT/tr512.json > $OUT/steps.txt 2>&1 <<'PY'
import json, sys
for fn in sys.argv[1:]:
    ev = json.load(open(fn)); ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    xs = [e for e in ev if e.get("ph") == "X" and not (e["name"].startswith("wait stage") and e["name"].split(" ")[3] not in ("100", "101", "102", "103", "104", "201", "202", "203"))]
    print(fn)
    names = sorted(set(" ".join(e["name"].split(" ")[:4]) if e["name"].startswith("wait stage") else " ".join(e["name"].split(" ")[:2]) if e["name"].startswith("wait") else e["name"].split(" ")[0] for e in xs))
    for k in names:
        s = [e for e in xs if e["name"].startswith(k)]
        st = sorted(float(e["ts"]) for e in s); en = sorted(float(e["ts"]) + float(e["dur"]) for e in s); du = sorted(float(e["dur"]) for e in s)
        print("  %-22s n=%4d start %7.1f..%7.1f end %7.1f..%7.1f dur %6.2f / %6.2f / %6.2f" % (k, len(s), st[0], st[-1], en[0], en[-1], du[0], du[len(du)//2], du[-1]))
PY
gzip $OUT/*.json
for f in $OUT/logs/dec-* $OUT/logs/grid-* $OUT/logs/qwen-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
cat $OUT/steps.txt | head -80 >> $S
pack; cat $S
