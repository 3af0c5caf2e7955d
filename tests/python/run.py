"""Runs the Python package's tests (unittest discovery over tests/python,
as `python3 -m unittest discover -s tests/python -p 'test_*.py'` does) and
prints one closing line: "python-test: N passed, N failed, N skipped".
Exit status 0 when nothing failed."""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py", top_level_dir=here)
verbosity = int(os.environ.get("LOOM_TEST_VERBOSITY", "1"))
result = unittest.TextTestRunner(verbosity=verbosity).run(suite)
failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
skipped = len(result.skipped)
passed = result.testsRun - failed - skipped
print(f"python-test: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(0 if result.wasSuccessful() and failed == 0 else 1)
