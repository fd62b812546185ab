"""The consumer's own stacks (a package named like hyperpod-dpd's folder, on purpose: they must not collide)."""
