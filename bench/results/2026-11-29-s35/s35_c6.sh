# Session 35 call 6 (nvidia-h200): is the decode finisher's top-k slow because its code runs cold?
# The probe build of dce9726 (-DMOE_HEAD_PROBE) runs gate_tokens twice in each tile's finish
# (slice 103 the first time, 105 the same again, same results) and records the head's steps;
# traces at T = 1, 128, 512 (E = 64, k = 8) and at T = 128 with E = 8, k = 2.
source scratch/dev_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
B=scratch/bin
for T in 1 128 512; do
  t tr$T 30 $B/loom_probe moe --gpus 1 --impl fused --tokens $T --experts 64 --topk 8 --iters 5 --trace $OUT/tr$T.json
done
t trmix 30 $B/loom_probe moe --gpus 1 --impl fused --tokens 128 --experts 8 --topk 2 --iters 5 --trace $OUT/trmix.json
python3 - $OUT/tr1.json $OUT/tr128.json $OUT/tr512.json $OUT/trmix.json > $OUT/steps.txt 2>&1 <<'PY'
import json, sys
for fn in sys.argv[1:]:
    ev = json.load(open(fn)); ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    xs = [e for e in ev if e.get("ph") == "X" and e["name"].startswith("wait stage") and e["name"].split(" ")[3] in ("100", "101", "102", "103", "104", "105", "201", "202", "203")]
    print(fn)
    for k in sorted(set(e["name"] for e in xs)):
        s = [e for e in xs if e["name"] == k]
        st = sorted(float(e["ts"]) for e in s); en = sorted(float(e["ts"]) + float(e["dur"]) for e in s); du = sorted(float(e["dur"]) for e in s)
        print("  %-22s n=%4d start %7.1f..%7.1f end %7.1f..%7.1f dur %6.2f / %6.2f / %6.2f" % (k, len(s), st[0], st[-1], en[0], en[-1], du[0], du[len(du)//2], du[-1]))
PY
gzip $OUT/*.json
cat $OUT/steps.txt >> $S
pack; cat $S
