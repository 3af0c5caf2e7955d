# sourced by the device scripts: environment, carried binaries, a timed runner with a deadline
export NCCL_NVLS_ENABLE=0
NL=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')/lib
export LD_LIBRARY_PATH=$NL:$LD_LIBRARY_PATH
[ -f scratch/carry.tar.xz ] && tar xJf scratch/carry.tar.xz
S=$OUT/summary.txt
DEADLINE=${DEADLINE:-560}
t() {  # t NAME TIMEOUT CMD...: runs if time is left, logs to $OUT/NAME.log
  local name=$1 tmo=$2; shift 2
  local left=$((DEADLINE - SECONDS))
  if [ $left -lt 20 ]; then echo "$name SKIPPED (no time)" >> $S; return; fi
  [ $tmo -gt $left ] && tmo=$left
  local s=$SECONDS
  echo "== $*" > $OUT/$name.log
  timeout $tmo stdbuf -oL "$@" >> $OUT/$name.log 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s | $(tail -1 $OUT/$name.log | cut -c1-160)" >> $S
}
pack() { (cd $OUT && tar czf logs.tgz --exclude=logs.tgz $(ls | grep -v '^summary.txt$') && find . -maxdepth 1 -type f ! -name logs.tgz ! -name summary.txt -delete); }
