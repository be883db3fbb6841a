"""tracer's version, in one place (the package, the files it marks and --version read it)."""

__version__ = "0.1.0"
