#!/usr/bin/env bash
# Runs the CPU test binaries given as arguments and prints one total line.
set -u
pass=0
fail=0
for t in "$@"; do
  echo "== $t"
  out=$("$t" 2>&1)
  rc=$?
  printf '%s\n' "$out"
  line=$(printf '%s\n' "$out" | grep -E '[0-9]+ passed, [0-9]+ failed' | tail -n 1)
  p=$(printf '%s' "$line" | sed -E 's/.* ([0-9]+) passed.*/\1/')
  f=$(printf '%s' "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
  [ -n "$line" ] || { p=0; f=1; echo "no summary line from $t"; }
  [ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || f=1
  pass=$((pass + p))
  fail=$((fail + f))
done
echo "make-test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
