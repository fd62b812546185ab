"""The consumer's own constructs (a package named like hyperpod-dpd's folder, on purpose: they must not collide)."""
