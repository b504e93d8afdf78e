"""Measurements behind the docs' speed and FID numbers (scripts/README.md)."""
