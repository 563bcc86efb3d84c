"""The result of a causal-order search."""

from dataclasses import dataclass, field

import numpy as np


@dataclass
class FitResult:
    """What :func:`paralingam.fit` found.

    Attributes
    ----------
    causal_order : list of int
        Column indices, root first.
    adjacency_matrix : ndarray, shape (n_features, n_features)
        ``B[i, j]`` is the estimated direct effect of column ``j`` on ``i``.
    names : list of str or None
        Column names when the input had them.
    stats : dict
        ``backend``; ``explained`` ({variable: root that completed it});
        ``compared`` and ``pairs`` per iteration (comparisons done versus
        the ``r (r - 1) / 2`` pairs); ``gamma`` (threshold at the end of each
        iteration) and ``rounds``; ``comparisons_saved`` (fraction);
        ``n_rederived`` (covariance re-derivations); ``scores`` (the
        root's score of every iteration, summed in index order; float32
        scores with the default dtype); ``float64_redo`` and
        ``float64_candidates`` per iteration (a root re-decided in float64,
        among how many rivals); ``float64_pairs`` and ``float64_chunks``
        per iteration (CUDA: the pairs those re-decisions compared in
        double, and the blocks each pair was split among); ``threads`` per
        iteration (CPU);
        ``all_pairs`` per iteration (CUDA: every pair compared in one
        round, without the threshold);
        ``prior_knowledge_unmet`` when a fully explained variable broke a
        strict prior-knowledge rule; ``time`` per phase in s.
    """

    causal_order: list
    adjacency_matrix: np.ndarray
    names: list = None
    stats: dict = field(default_factory=dict)

    @property
    def causal_order_names(self):
        """The causal order as column names (indices when unnamed)."""
        if self.names is None:
            return list(self.causal_order)
        return [self.names[i] for i in self.causal_order]

    def to_dict(self):
        """A JSON-serialisable summary."""
        stats = dict(self.stats)
        stats["explained"] = {str(k): int(v) for k, v in stats.get("explained", {}).items()}
        return {
            "causal_order": [int(i) for i in self.causal_order],
            "causal_order_names": [str(v) for v in self.causal_order_names],
            "names": self.names,
            "adjacency_matrix": self.adjacency_matrix.tolist(),
            "stats": stats,
        }
