"""Shared Python modules of the scripts: the MAR model, its diffusion, official sizes, export graphs, data (scripts/README.md)."""
