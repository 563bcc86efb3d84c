"""Data shared by the tests that compare paralingam with lingam 1.13."""

import functools

import numpy as np


@functools.lru_cache(maxsize=None)
def tutorial_data(seed=100, n=1000):
    """lingam's DirectLiNGAM tutorial data (6 variables, uniform noise), read-only.

    Several variables are almost exact linear functions of their parents, so
    LARS paths end early through sklearn's tolerance on alpha: a case that
    random LiNGAM data rarely reaches.
    """
    rng = np.random.RandomState(seed)
    x3 = rng.uniform(size=n)
    x0 = 3.0 * x3 + rng.uniform(size=n)
    x2 = 6.0 * x3 + rng.uniform(size=n)
    x1 = 3.0 * x0 + 2.0 * x2 + rng.uniform(size=n)
    x5 = 4.0 * x0 + rng.uniform(size=n)
    x4 = 8.0 * x0 - 1.0 * x2 + rng.uniform(size=n)
    X = np.array([x0, x1, x2, x3, x4, x5]).T.copy()
    X.setflags(write=False)
    return X


def random_prior_knowledge(p, seed, frac_no_path=0.3):
    """A prior-knowledge matrix with random "no path" (0) entries, else -1."""
    rng = np.random.default_rng(seed)
    pk = np.full((p, p), -1)
    pk[rng.random((p, p)) < frac_no_path] = 0
    np.fill_diagonal(pk, -1)
    return pk


def lingam_adjacency(X, order, prior_knowledge=None):
    """lingam's adaptive-lasso adjacency matrix for a given order."""
    from lingam_oracle import lingam_module

    lingam = lingam_module("lingam", "lingam_cases")
    model = lingam.DirectLiNGAM(prior_knowledge=prior_knowledge)
    model._causal_order = list(order)
    model._estimate_adjacency_matrix(np.asarray(X), prior_knowledge=model._Aknw)
    return model.adjacency_matrix_
