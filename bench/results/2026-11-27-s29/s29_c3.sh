#!/bin/bash
# session 29, call 3 (4x H100): fence.acq_rel.sys instead of fence.sc.sys (__threadfence_system) where the
# reduce-scatter / all-reduce kernel releases (done() of the one-tile and one-shot modes, publish(), the
# last slice's count): LOOM_PROBE bit 32 (probe3.diff, not for landing); 8 adds the per-block stamps.
source scratch/dev_env.sh
B=scratch/bin
export LOOM_PROBE_PERGPU=1
L="--check-tokens 16 --iters 60 --warmup 10 --hidden 8192"
M="--check-tokens 16 --iters 40 --warmup 10"
for r in 1 2; do
  for p in 8 40; do
    t rs16g4-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 16 --ffn 28672
    t ar16g4-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 16 --ffn 28672
    t rs16g2-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-rs --gpus 2 --impl fused $L --tokens 16 --ffn 14336
  done
  for p in 0 32; do
    t ar128-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-ar --gpus 4 --impl fused $L --tokens 128 --ffn 28672
    t rs128-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-rs --gpus 4 --impl fused $L --tokens 128 --ffn 28672
    t mkrs4k-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-rs --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
    t mkar4k-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-ar --gpus 4 --impl fused --tokens 4096 --hidden 256 --ffn 4096 $M
    t arfloor-p$p-$r 40 env LOOM_PROBE=$p $B/loom gemm-ar --gpus 4 --impl fused --hidden 128 --ffn 256 --tokens 256 --check-tokens 16 --iters 100 --warmup 10
  done
done
for f in $OUT/logs/*.log; do echo "$(basename $f .log): $(grep -E 'fused +median' $f | sed 's/.*median \([0-9.]*\) us (min \([0-9.]*\), max \([0-9.]*\)).*phases end at/\1 us [\2..\3] |/')"; done >> $S
for f in $OUT/logs/*16g*.log; do echo "== $(basename $f .log)"; grep -E "stamps" $f | sed 's/(us from.*n)://'; done >> $S
pack; cat $S
