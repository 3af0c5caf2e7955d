# NOTE (call 10): the loom_p* binaries this call ran were mislinked (HEAD's moe.o stayed in
# libloom.a); they were HEAD. See bench/RESULTS.md session 45 (c).
# Session 45 call 2 (nvidia-h200): what the 128 x 256 consumers' 16-bit epilogue costs, by
# parts: loom_p1 = HEAD 6054f26 with every epilogue store dropped (an opaque 0 in the store
# predicate; shuffles and converts kept), loom_p2 = the stores kept and the quad transposes
# dropped (words stored untransposed); both give wrong results (timing only), against loom_e
# (HEAD), alternating (the probes carry a harness that times past a failed verify when
# LOOM_PROBE_NOVERIFY is set); then ncu per instruction (warp-state samples) of one loom_e launch at
# T = 16384, exported as the SASS source page.
DEADLINE=400
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
export LOOM_PROBE_NOVERIFY=1 # the probe binaries time results that fail verification (their harness; loom_e ignores it)
: > $S
B=scratch/bin
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 4"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
for r in 1 2; do
  for v in e p1 p2; do t pre-$v-$r 20 $B/loom_$v moe $P; done
  for v in e p1 p2; do t qwen-$v-$r 20 $B/loom_$v moe $Q; done
done
for v in e p1 p2; do t tr-$v 30 $B/loom_$v moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 4 --trace $OUT/tr$v.json; done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
t ncu16k 150 $NCU --clock-control none -k regex:moe_kernel --launch-skip 2 --launch-count 1 \
   --section WarpStateStats --section SourceCounters -o $OUT/n16k \
   $B/loom_e moe --gpus 1 --impl fused --iters 1 --warmup 2 --check-tokens 4 --tokens 16384
[ -f $OUT/n16k.ncu-rep ] && $NCU -i $OUT/n16k.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $OUT/n16k_sass.csv.gz
rm -f $OUT/n16k.ncu-rep
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-* $OUT/qwen-* $OUT/tr-*; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*phases end at \(.*\)/\1 (\2)/' | tr '\n' ' ')"; done >> $S
pack; cat $S
