# Session 40 call 5 (nvidia-h200, a fresh machine): the Python package's tests on a GPU after
# this session's Python changes (a19932f .. 59a5936), against libloom.so linked here from the
# objects of fea0428's CI build and build/python/libloom_ref.so (both carried).
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh; : > $S; DEADLINE=420; export PYTHONUNBUFFERED=1
python3 -c 'import torch; print("torch", torch.__version__)' >> $S 2>&1
t py-all 400 env PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1 LOOM_LIBRARY=$PWD/build/libloom.so LOOM_REFERENCE_LIBRARY=$PWD/build/python/libloom_ref.so LOOM_TEST_VERBOSITY=2 python3 tests/python/run.py
grep -E ' \.\.\. (FAIL|ERROR|skipped)' $OUT/py-all.log | head -30 >> $S; pack; cat $S
