"""Pod readiness gates: each replica reports what its data plane applied
(``report``), the leader opens each pod's gate once every live replica has
(``flipper``), deciding by ``decide`` (pure)."""
