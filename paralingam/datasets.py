"""Synthetic LiNGAM data in the style of the ParaLiNGAM paper (Sec. 6.3)."""

import numpy as np


def make_lingam_data(n_features, n_samples, *, density="sparse", random_state=None):
    """Sample data from a random linear non-Gaussian acyclic model.

    Each variable gets a number of parents drawn uniformly from
    ``[1, 0.2 p]`` (sparse) or ``[0.25 p, 0.5 p]`` (dense), edge weights from
    ``+-[0.5, 0.95]``, and noise ``sign(e) |e|**q`` with Gaussian ``e`` and
    ``q`` from ``[0.5, 0.8]`` or ``[1.2, 2]``. Each variable is scaled to unit
    variance as it is generated (``B`` is scaled with it), and columns are
    shuffled.

    Parameters
    ----------
    n_features, n_samples : int
    density : {"sparse", "dense"}
    random_state : int or numpy.random.Generator, optional

    Returns
    -------
    X : ndarray, shape (n_samples, n_features)
    B : ndarray, shape (n_features, n_features)
        Weights, ``B[i, j]`` the effect of column ``j`` on column ``i``.
    true_order : ndarray
        A causal order of the columns of ``X``.
    """
    if density not in ("sparse", "dense"):
        raise ValueError(f"density must be 'sparse' or 'dense', got {density!r}")
    rng = np.random.default_rng(random_state)
    p = n_features
    B, noise = _draw_model(rng, p, n_samples, density)
    X = np.zeros((n_samples, p))
    for i in range(p):
        X[:, i] = X @ B[i] + noise[:, i]
        # Rescale each variable before it feeds its children: without this the
        # variance grows geometrically along the order and, past p ~ 100, the
        # noise of late variables falls under float64 resolution.
        scale = X[:, i].std()
        X[:, i] /= scale
        B[i] /= scale
    perm = rng.permutation(p)  # column perm[k] of the model becomes column k
    inverse = np.argsort(perm)
    return X[:, perm], B[np.ix_(perm, perm)], inverse[np.arange(p)]


def _draw_model(rng, p, n, density):
    """The random draws of :func:`make_lingam_data`, in its order, from ``rng``.

    Returns the weights ``B`` (in causal order, before any scaling) and the
    noise, shape (n, p); the caller then builds the variables in order and
    permutes them with ``rng.permutation(p)``.
    """
    lo, hi = (1, max(1, int(0.2 * p))) if density == "sparse" else (
        max(1, int(0.25 * p)), max(1, int(0.5 * p)))
    B = np.zeros((p, p))
    for i in range(1, p):
        k = min(i, int(rng.integers(lo, hi + 1)))
        parents = rng.choice(i, size=k, replace=False)
        B[i, parents] = rng.choice([-1.0, 1.0], size=k) * rng.uniform(0.5, 0.95, size=k)
    q = np.where(rng.random(p) < 0.5, rng.uniform(0.5, 0.8, p), rng.uniform(1.2, 2.0, p))
    e = rng.standard_normal((n, p))
    return B, np.sign(e) * np.abs(e) ** q
