"""The package version, at the ground floor so that any room can read it without importing nqf."""

__version__ = "1.0.0"
