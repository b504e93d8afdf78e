"""Python fixtures and checks for the Go tests beside them (scripts/README.md)."""
