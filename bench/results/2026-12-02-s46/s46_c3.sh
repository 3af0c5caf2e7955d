# Session 46 call 3 (nvidia-h200): what a 3-stage 128 x 256 ring costs the MoE (the price of 64 KB
# of epilogue staging). HEAD built here; loom_s3 = HEAD with moe.o from the s3 tree
# (s3_stages.diff: moe_hop's rings 3 stages, the swapped rings 7 / 6 stages so they end before it,
# MOE_TASK_SLOTS 11), compiled on the dev machine and carried. Alternating, two rounds.
DEADLINE=570
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
s=$SECONDS; make -j16 build/loom > $OUT/build.log 2>&1; echo "build rc=$? $((SECONDS-s))s" >> $S
mkdir -p /tmp/b && cp build/loom /tmp/b/loom_e
cp scratch/moe_s3.o build/obj/src/device/ops/moe.o && touch build/obj/src/device/ops/moe.o
make build/libloom.a build/loom >> $OUT/build.log 2>&1 && cp build/loom /tmp/b/loom_s3; echo "link s3 rc=$?" >> $S
cmp -s /tmp/b/loom_e /tmp/b/loom_s3 && echo "BINARIES IDENTICAL" >> $S
P="--gpus 1 --impl fused --tokens 4096,16384 --iters 10 --check-tokens 4"
Q="--gpus 1 --impl fused --tokens 8192 --experts 128 --topk 8 --ffn 768 --act swiglu --iters 10 --check-tokens 4"
for r in 1 2; do
  for v in e s3; do t pre-$v-$r 25 /tmp/b/loom_$v moe $P; done
  for v in e s3; do t qwen-$v-$r 25 /tmp/b/loom_$v moe $Q; done
done
for v in e s3; do t tr-$v 30 /tmp/b/loom_$v moe --gpus 1 --impl fused --tokens 16384 --iters 5 --check-tokens 4 --trace $OUT/tr$v.json; done
gzip $OUT/*.json 2>/dev/null
for f in $OUT/pre-*.log $OUT/qwen-*.log; do echo "$(basename $f .log): $(grep -c 'verify: ok' $f) ok; $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us.*/\1/' | tr '\n' ' ')"; done >> $S
pack; cat $S
