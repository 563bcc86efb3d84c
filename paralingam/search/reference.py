"""Plain numpy DirectLiNGAM causal-order search: the oracle of every test.

This module follows lingam 1.13's ``DirectLiNGAM`` with ``measure="pwling"``
step by step and favours readability over speed. It must not import lingam.

The math, per iteration over the remaining variables ``U``:

* every variable is standardised with its population (ddof=0) mean and std;
* ``x_i`` is regressed on ``x_j`` with the coefficient
  ``cov(x_i, x_j, bias=True) / var(x_j)`` and the residual is divided by its
  own population std;
* the pairwise statistic is
  ``I(i, j) = H(x_j) + H(r_i^(j)) - H(x_i) - H(r_j^(i))`` with the
  Hyvarinen-Smith maximum-entropy approximation ``H``;
* the score of ``i`` is ``sum_j min(0, I(i, j))**2`` and the root is the
  argmin, ties going to the earliest remaining variable;
* the root is regressed out of every remaining variable.

Degenerate data (the policy shared by every backend, see ``paralingam.search.policy``):

* a pair whose residual is an exact dependence (its measured residual
  fraction at most ``collinear_tol`` and at the level of its rounding noise,
  ``paralingam.search.policy.is_dependent``) is collinear; linked variables form a group that is represented by its first
  member. Only representatives are compared and can become the root, and a
  representative's score counts each group by its size:
  ``score(a) = sum_G |G| min(0, I(a, rep(G)))**2``. (In exact arithmetic the
  members of a group are copies of each other, so this is lingam's score with
  its ties broken towards the earliest column, instead of by rounding noise.)
* a variable whose remaining-variance fraction (the product of the
  measured residual fractions of the roots regressed out of it) falls to
  ``explained_tol`` or below, with the last residual at the level of its
  rounding noise, is *fully explained*: it leaves the search and is
  placed right after the root that completed it (ascending column index when a
  root completes several).

Prior knowledge (lingam's rules, implemented in ``paralingam.prior``): each
iteration splits the remaining variables into *candidates* (they may become
the root), variables in ``V_j`` and the others. Only candidates get a score,
but every remaining variable is a partner of every candidate; a partner
``j`` in ``V_j`` is compared with its own standardised values in place of its
residual, ``I(i, j) = H(r_i^(j)) - H(x_i)``. A single candidate is the root
with no comparison. With degenerate data, collinear groups are formed only
among variables of the same status (candidate, ``V_j``, other), so the
members of a group share one rule; collinear variables of different statuses
stay in separate groups and, as any collinear pair, compare as
``I(i, j) = 0``. Only candidate groups can give the root.
"""

import numpy as np

from .. import _constants
from .policy import (COLLINEAR_TOL, EXPLAINED_TOL, LinearDependenceError, initial_noise,
                     is_dependent, pair_noise, regressed_noise, residual_fraction)
from ..prior import PriorKnowledge

# The maximum-entropy approximation's constants (kernels/pl_constants.h,
# shared with the CPU and CUDA engines): H_GAUSS = (1 + log(2 pi)) / 2 and
# GAMMA (the kernels' PL_BETA) = E log cosh of a standard Gaussian.
K1 = _constants.K1
K2 = _constants.K2
GAMMA = _constants.BETA
H_GAUSS = _constants.H_GAUSS
LN2 = _constants.LN2


def entropy(u):
    """Maximum-entropy approximation of the differential entropy.

    Parameters
    ----------
    u : ndarray, shape (..., n_samples)
        Standardised samples, one variable per row.

    Returns
    -------
    ndarray, shape (...)
    """
    # log(cosh(u)) written so that it cannot overflow for large |u|.
    log_cosh = np.logaddexp(u, -u) - LN2
    return (
        H_GAUSS
        - K1 * (log_cosh.mean(axis=-1) - GAMMA) ** 2
        - K2 * (u * np.exp(-0.5 * u * u)).mean(axis=-1) ** 2
    )


def standardise(Xu):
    """Population-standardised columns."""
    return (Xu - Xu.mean(axis=0)) / Xu.std(axis=0)


# Pairs whose 1 - rho**2 (absolute rounding error about eps) is above this
# band cannot be dependent; the backends use the same band before they
# measure a pair's residual from the rows (kernels/pl_constants.h).
VERIFY_BAND = _constants.VERIFY_BAND


def verify_band(collinear_tol):
    """``1 - rho**2`` above this cannot hold a residual fraction ``<= collinear_tol``."""
    return max(VERIFY_BAND, _constants.VERIFY_BAND_TOL * collinear_tol)


def collinear_pairs(Z, collinear_tol=COLLINEAR_TOL, noise=None):
    """``linked[i, j]``: columns ``i`` and ``j`` of ``Z`` are collinear.

    Parameters
    ----------
    Z : ndarray, shape (n_samples, r)
        Standardised data.
    noise : ndarray, shape (r,), optional
        Rounding noise of each column (``paralingam.search.policy``); zero if None.

    A pair is collinear when the residual of the later column on the earlier
    one is an exact dependence (:func:`paralingam.search.policy.is_dependent`);
    only pairs with ``1 - rho**2`` within :func:`verify_band` are measured.
    """
    r = Z.shape[1]
    nu = np.zeros(r) if noise is None else np.asarray(noise, dtype=np.float64)
    cov = np.cov(Z.T, bias=True).reshape(r, r)
    var = np.diag(cov)
    near = 1.0 - cov**2 / np.outer(var, var) <= verify_band(collinear_tol)
    linked = np.eye(r, dtype=bool)
    for a, b in zip(*np.nonzero(np.triu(near, 1))):
        f = residual_fraction(Z[:, b], Z[:, a])
        linked[a, b] = linked[b, a] = is_dependent(
            f, 1.0, collinear_tol, pair_noise(nu[a], nu[b]))
    return linked


def collinear_groups(Z, collinear_tol=COLLINEAR_TOL, status=None, noise=None):
    """First member of each variable's collinear group.

    Parameters
    ----------
    Z : ndarray, shape (n_samples, r)
        Standardised data.
    status : ndarray of int, shape (r,), optional
        Prior-knowledge status of each column (``CANDIDATE``, ``IN_VJ`` or
        ``OTHER``); only columns of equal status are linked.
    noise : ndarray, shape (r,), optional
        Rounding noise of each column (:func:`collinear_pairs`).

    Returns
    -------
    ndarray of int, shape (r,)
        ``group[k]``: the smallest column linked to ``k`` through a chain of
        collinear pairs (``k`` itself if none).
    """
    linked = collinear_pairs(Z, collinear_tol, noise)
    if status is not None:
        linked &= status[:, None] == status[None, :]
    group = np.arange(Z.shape[1])
    for k in range(Z.shape[1]):  # grow each group from its first member
        if group[k] != k:
            continue
        todo = [k]
        while todo:
            j = todo.pop()
            for m in np.flatnonzero(linked[j] & (group == np.arange(Z.shape[1]))):
                if m > k:
                    group[m] = k
                    todo.append(m)
    return group


def pairwise_statistics(Z, collinear_tol=COLLINEAR_TOL, in_vj=None, noise=None):
    """Likelihood-ratio statistics ``I(i, j)`` of all ordered pairs.

    Parameters
    ----------
    Z : ndarray, shape (n_samples, r)
        Standardised data.
    in_vj : ndarray of bool, shape (r,), optional
        Columns in ``V_j`` (prior knowledge): as the partner ``j`` of a
        candidate, such a column stands in for its own residual, so
        ``I(i, j) = H(r_i^(j)) - H(x_i)``.
    noise : ndarray, shape (r,), optional
        Rounding noise of each column (:func:`collinear_pairs`).

    Returns
    -------
    ndarray, shape (r, r)
        ``I[i, j]``, the statistic of ``i`` against partner ``j``; zero on the
        diagonal and for collinear pairs (``paralingam.search.policy``).
        Antisymmetric unless ``in_vj`` has a True entry.
    """
    linked = collinear_pairs(Z, collinear_tol, noise)  # includes the diagonal
    Z = Z.T  # one variable per row
    r = Z.shape[0]
    cov = np.cov(Z, bias=True).reshape(r, r)
    var = np.diag(cov)
    h_x = entropy(Z)
    # h_res[i, j] = H of the standardised residual of x_i regressed on x_j.
    h_res = np.zeros((r, r))
    for i in range(r):
        res = Z[i] - (cov[i] / var)[:, None] * Z
        res[linked[i]] = Z[i]  # self and collinear pairs are set to 0 below; keep them finite
        res /= res.std(axis=1, keepdims=True)
        h_res[i] = entropy(res)
    # h_partner[i, j] = H(r_j^(i)), or H(x_j) itself for j in V_j (lingam's
    # I(i, j) = H(x_j) + H(r_i^(j)) - H(x_i) - H(x_j), in that form).
    h_partner = h_res.T.copy()
    if in_vj is not None:
        h_partner[:, in_vj] = h_x[in_vj]
    stat = (h_x[None, :] + h_res) - (h_x[:, None] + h_partner)
    stat[linked] = 0.0
    return stat


# prior-knowledge status of a remaining variable (kernels/pl_constants.h)
OTHER, IN_VJ, CANDIDATE = _constants.OTHER, _constants.IN_VJ, _constants.CANDIDATE


def statuses(prior, remaining):
    """The prior-knowledge status of each remaining variable: CANDIDATE, IN_VJ or OTHER.

    ``prior``: a :class:`~paralingam.prior.PriorKnowledge`, or None (every
    variable a candidate); ``remaining``: original indices, ascending.
    """
    if prior is None:
        return np.full(len(remaining), CANDIDATE)
    is_candidate, in_vj = prior.candidates(remaining)
    return np.where(is_candidate, CANDIDATE, np.where(in_vj, IN_VJ, OTHER))


def causal_order(X, collinear_tol=COLLINEAR_TOL, explained_tol=EXPLAINED_TOL,
                 prior_knowledge=None, apply_prior_knowledge_softly=False, *,
                 stop_on_dependence=False, return_scores=False):
    """Estimate the causal order of ``X`` with DirectLiNGAM (pwling).

    Parameters
    ----------
    X : array-like, shape (n_samples, n_features)
        Data, one column per variable. Columns must not be constant.
    collinear_tol, explained_tol : float
        Tolerances of the degenerate-data policy (module docstring).
    prior_knowledge : array-like, shape (n_features, n_features), optional
        lingam's prior-knowledge matrix (``paralingam.prior``).
    apply_prior_knowledge_softly : bool
        Apply it softly instead of as strict partial orders.
    stop_on_dependence : bool
        Raise :class:`~paralingam.search.policy.LinearDependenceError` at the first
        exact dependence (a collinear group among the remaining variables, or
        a variable fully explained) instead of applying the policy.
    return_scores : bool
        Also return the root's score of every search iteration.

    Returns
    -------
    order : list of int
        Column indices, root first.
    explained : dict
        ``{variable: root}`` for every variable found fully explained, with
        the root whose regression completed it.
    scores : list of float
        Only with ``return_scores``: the score of each iteration's root (one
        per root chosen by a search; the last variable needs none).
    """
    X_ = np.array(X, dtype=np.float64, copy=True)
    # Scale each column by a power of two (exact: no rounding changes) to a
    # maximum magnitude in [0.5, 1), so that squares of tiny columns cannot
    # underflow; paralingam.fit scales the data it searches the same way.
    X_ = np.ldexp(X_, -np.frexp(np.abs(X_).max(axis=0, initial=0.0))[1])
    n_features = X_.shape[1]
    prior = None
    if prior_knowledge is not None:
        prior = PriorKnowledge(prior_knowledge, n_features, soft=apply_prior_knowledge_softly)
    remaining = list(range(n_features))  # kept in ascending order
    frac = np.ones(n_features)  # remaining-variance fraction per variable
    nu = initial_noise(X_)  # rounding noise of each row, in its standard deviations
    order, explained, root_scores = [], {}, []

    while remaining:
        if len(remaining) == 1:
            order.append(remaining.pop())
            break
        status = statuses(prior, remaining)
        Z = standardise(X_[:, remaining])
        group = collinear_groups(Z, collinear_tol, status, nu[remaining])
        reps = np.flatnonzero(group == np.arange(len(remaining)))
        size = np.bincount(group)[reps]
        if stop_on_dependence and len(reps) < len(remaining):
            first = reps[np.flatnonzero(size > 1)[0]]  # group of the first collinear pair
            raise LinearDependenceError(
                "collinear", [remaining[k] for k in np.flatnonzero(group == first)], order)
        cands = np.flatnonzero(status[reps] == CANDIDATE)
        if len(cands) == 1:  # one candidate group: the root, no comparison
            best = cands[0]
            root_scores.append(0.0)
        else:
            stat = pairwise_statistics(Z[:, reps], collinear_tol, status[reps] == IN_VJ,
                                       nu[remaining][reps])
            scores = (np.minimum(0.0, stat) ** 2 * size[None, :]).sum(axis=1)
            best = cands[int(np.argmin(scores[cands]))]  # first minimum: earliest
            root_scores.append(float(scores[best]))
        root = remaining[reps[best]]
        order.append(root)
        remaining.remove(root)

        xr = X_[:, root]
        done = []
        for i in remaining:
            xi = X_[:, i]
            f = residual_fraction(xi, xr)
            noise = pair_noise(nu[i], nu[root])
            if is_dependent(f, frac[i], explained_tol, noise):
                done.append(i)
            else:
                frac[i] *= f
                nu[i] = regressed_noise(noise, f)
                cov = np.cov(xi, xr, bias=True)
                X_[:, i] = xi - (cov[0, 1] / np.var(xr)) * xr
        if stop_on_dependence and done:
            raise LinearDependenceError("explained", done, order)
        for i in done:
            remaining.remove(i)
            order.append(i)
            explained[i] = root
    if return_scores:
        return order, explained, root_scores
    return order, explained
