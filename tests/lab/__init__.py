"""Lab tests: the real-kernel backend (a package, so that its conftest does not shadow tests/conftest.py)."""
