"""Model packs: export, random-weight packs, and tools that add graphs to a pack (scripts/README.md)."""
