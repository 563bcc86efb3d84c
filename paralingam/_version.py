"""The package version, in one place: setup (pyproject.toml) and ``paralingam.__version__`` read it."""

__version__ = "0.1.0"
