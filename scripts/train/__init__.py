"""Training: the Fashion-MNIST models, the evaluator, and the parts trained on a frozen target (scripts/README.md)."""
