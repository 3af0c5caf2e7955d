# The package version: LOOM_VERSION_MAJOR.MINOR.PATCH of include/loom.h
# (setup.py refuses to build when the two disagree).
__version__ = "0.1.0"
