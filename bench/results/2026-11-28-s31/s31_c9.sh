#!/bin/bash
# session 31, call 9 (2 GPUs): bench/probe_bulk_peer.cu: rows pushed to a peer GPU by TMA bulk stores
# (one thread, from shared memory) against every thread's 16-byte stores; the local destination beside.
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $OUT/gpu.txt
nvidia-smi topo -m > $OUT/topo.txt 2>&1
timeout 120 scratch/bin2/probe_bulk_peer | tee $OUT/probe_bulk_peer.txt
