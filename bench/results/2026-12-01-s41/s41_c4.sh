# Session 41 call 4 (nvidia-h200): the kept tree (a5a234e + test_moe's decode case 5) on the GPU:
# test_moe single (the capacity clamp, 5783856; the new decode case, k = E = 8, 24 rows an expert,
# on the 128 x 256 tile here) and the Python package's tests (this session's config / reference /
# CPU-forward changes). Built here (make build/libloom.so build/python/libloom_ref.so
# build/tests/test_moe) and carried in scratch/carry.tar.xz.
DEADLINE=420
source bench/results/2026-11-26-h200x2/scripts/dev_env.sh
: > $S
export PYTHONUNBUFFERED=1
python3 -c 'import torch; print("torch", torch.__version__)' >> $S 2>&1
t moe-single 150 scratch/bin/test_moe single
t py-all 200 env PYTHONPATH=python PYTHONDONTWRITEBYTECODE=1 LOOM_LIBRARY=$PWD/build/libloom.so LOOM_REFERENCE_LIBRARY=$PWD/build/python/libloom_ref.so LOOM_TEST_VERBOSITY=2 python3 tests/python/run.py
grep -E ' \.\.\. (FAIL|ERROR|skipped)' $OUT/py-all.log | head -30 >> $S
pack; cat $S
