# Session 37 call 2 (nvidia-h200): bench/probe_icache.cu — straight-line code speed, cold and
# again, and whether a launch finds the previous launch's code still cached.
source scratch/dev_env.sh
t icache 120 scratch/bin/probe_icache
t icache2 120 scratch/bin/probe_icache
cat $OUT/logs/icache.log $OUT/logs/icache2.log
pack; cat $S
