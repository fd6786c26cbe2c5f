"""The benchmark suite (pytest-benchmark): see README.md."""
