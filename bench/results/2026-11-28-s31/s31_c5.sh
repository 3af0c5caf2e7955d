#!/bin/bash
# session 31, call 5 (1 GPU): bench/probe_dmma.cu with the gate's 48 conversions per 8 DMMAs:
# F2F (as vec8::get) against the double built with integer ops.
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $OUT/gpu.txt
scratch/bin2/probe_dmma | tee $OUT/probe_dmma.txt
