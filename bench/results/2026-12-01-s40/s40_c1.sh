# Session 40 call 1 (nvidia-h200): build HEAD (build/) and HEAD + swap_n16n32.diff (a copy in
# /tmp/swaptree) side by side with make -j8 each, keep the binaries in build/s40/ for the next
# calls, then HEAD's collective GEMMs after the gemm_rs.cu / gemm_ar.cu split (test_collective
# single, loopback).
DEADLINE=570
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
D=$PWD
nproc >> $S
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader >> $S
rm -rf build/s40 /tmp/swaptree && mkdir -p build/s40 /tmp/swaptree
tar cf - --exclude=./build --exclude=./bench/results . | (cd /tmp/swaptree && tar xf -)
mkdir -p /tmp/swaptree/bench/results
(cd /tmp/swaptree && { patch -p1 -s < $D/bench/results/2026-12-01-s40/swap_n16n32.diff || git apply $D/bench/results/2026-12-01-s40/swap_n16n32.diff; } && echo "patch ok" >> $S)
(make -j8 build/loom build/tests/test_moe build/tests/test_collective > $OUT/make_head.log 2>&1; echo "make-head rc=$? ${SECONDS}s" >> $S) &
(cd /tmp/swaptree && make -j8 build/loom build/tests/test_moe > $OUT/make_swap.log 2>&1; echo "make-swap rc=$? ${SECONDS}s" >> $S) &
wait
cp build/loom build/s40/loom_head && cp build/tests/test_collective build/tests/test_moe build/s40/ &&
  cp /tmp/swaptree/build/loom build/s40/loom_swap && cp /tmp/swaptree/build/tests/test_moe build/s40/test_moe_swap &&
  echo "binaries in build/s40: $(ls build/s40 | tr '\n' ' ')" >> $S
grep -h "moe_kernelILi0ELi2ELi1E.*spill stores" $OUT/make_head.log $OUT/make_swap.log | sed 's/.*function//' >> $S
B=build/s40
t coll-single 120 $B/test_collective single
t coll-loop 200 $B/test_collective loopback
pack; cat $S
