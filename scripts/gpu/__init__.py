"""The runs on a lent GPU machine and their packaging (scripts/README.md)."""
