#!/bin/bash
# session 31, call 2 (1 GPU): bench/probe_param.cu, a chain of dependent group-table reads where the
# engine keeps the table (generic pointer into the __grid_constant__ parameter) against direct
# parameter indexing, global memory and shared memory.
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $OUT/gpu.txt
scratch/bin2/probe_param | tee $OUT/probe_param.txt
