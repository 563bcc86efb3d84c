"""Minimum-norm least squares of each variable on its predecessors (dependent columns).

Once a variable is an exact linear combination of earlier ones (rank-deficient
or wide data), the predecessors of the variables after it have no Cholesky
factor; their rows are the minimum-norm least-squares solutions, which
:func:`_min_norm_rows` computes for all of them from one in-order
Gram-Schmidt basis of the data in O(p^2 r) for rank r.
"""

import numpy as np

from ._common import SINGULAR_TOL


# Refinement steps of a block of dependent variables (_dependent_block): each
# multiplies the error by about eps * cond of the block start's factor.
MIN_NORM_REFINEMENTS = 3

MIN_NORM_REFINED = 1e-12

# Variables per block (_min_norm_rows): about the basis's size, within these
# bounds. A dependent block of b variables on a basis of m costs
# O(m b^2 + b^3) besides its projection, so blocks much wider than the basis
# cost more than they save; wide data (m in the thousands) take the widest.
MIN_NORM_BLOCK = 256
MIN_NORM_MIN_BLOCK = 64

_NO_REST = np.zeros(0)  # min_norm_variables's rest2 where the residuals are not tracked

# Rows of the coefficients per product of the last step (_min_norm_rows): each
# chunk skips the columns after its last row, about half of Y C in all.
MIN_NORM_ROWS_CHUNK = 256


def _min_norm_rows(V, first, block=None):
    """Minimum-norm least squares of each variable from ``first`` on its predecessors.

    The variables are the columns of ``V`` (in causal order); a variable whose
    residual on the variables before it keeps no more than ``SINGULAR_TOL`` of
    its squared norm is *dependent*, an exact combination of the *basis*: the
    independent variables before it. Gram-Schmidt in causal order (twice, as
    one pass loses orthogonality) gives the basis orthonormal vectors ``U``
    and each variable ``j`` its coordinates ``l_j = U^T v_j``. With ``C_k``
    the coordinates of the variables before ``k`` as columns, the regression
    of ``k`` on them is ``pinv(C_k) l_k = C_k^T y_k`` with
    ``(C_k C_k^T) y_k = l_k``; ``C_k C_k^T`` gains ``l_j l_j^T`` with each
    variable, so its Cholesky factor is updated by Givens rotations
    (in ``_linalg.min_norm_variables``, the compiled loop of the variables
    that blocks cannot take) instead of refactorised. All rows cost
    O(p^2 r + d p r) for rank r, where a least-squares solve per target costs
    O(p^4) (docs/design/adjacency.rst, "Rank-deficient data: minimum-norm
    rows").

    The basis comes from the data, not from the covariance: the residual of
    an exact combination ``x_k = X a`` is then at ``eps |a| |X|``, where a
    covariance pivot is at its square and, after a nearly dependent variable,
    reaches ``SINGULAR_TOL`` (docs/design/adjacency.rst, "Rank-deficient
    data: minimum-norm rows").

    Parameters
    ----------
    V : ndarray, shape (d, p)
        Vectors of the variables in causal order (:func:`_data_vectors`).
    first : int
        The variables before ``first`` are independent (their rows are known).
    block : int, optional
        Variables projected on the basis at once (one BLAS-3 product); by
        default :func:`_block_width` of the basis as it stands.

    Returns
    -------
    coef : ndarray, shape (p - first, p)
        Row ``i``: the coefficients of variable ``first + i`` on the
        variables before it.
    """
    from ._linalg import MIN_NORM_SINGULAR, MIN_NORM_TO_BLOCKS, min_norm_variables

    d, p = V.shape
    sq_norm = np.einsum("ij,ij->j", V, V)
    lead, lead_rows = first, None
    if first:
        # one QR past `first`: the independent variables that follow (the
        # loop's test on the QR's diagonal) get their rows from its factor,
        # in BLAS-3, instead of one rotation sweep each
        end = min(d, p, 2 * first + _block_width(first, block))
        Q, T = np.linalg.qr(V[:, :end])
        diag2 = np.diag(T) ** 2
        joins = _joins(diag2, sq_norm[:end])
        joins[:first] = True  # the caller's word
        lead = int(np.argmin(joins)) if not joins.all() else end
        if lead > first:
            lead_rows = _independent_rows(T[:lead, :lead], first)
            if lead_rows is None:
                lead = first
    cap = max(lead, min(p, d, 64))
    U = np.zeros((d, cap), order="F")  # orthonormal basis, in the order its variables came
    C = np.zeros((cap, p))    # column j: l_j, the coordinates of variable j
    R = np.zeros((cap, cap))  # upper, R^T R = C_k C_k^T
    Y = np.zeros((p, cap))    # row k: y_k
    m = lead
    direct = {}  # rows solved by lstsq where the factor R is singular
    G = None     # C_k C_k^T at a block's start, for _dependent_block
    if lead:
        U[:, :lead], C[:lead, :lead] = Q[:, :lead], T[:lead, :lead]
        R[:lead, :lead] = np.linalg.qr(C[:lead, :lead].T, mode="r")
    # the basis vectors are zero from row `support` on: with V triangular (the
    # data's R), a variable's vector lies in the rows up to its own, and the
    # block's projections skip the rows that add exact zeros
    support = _support(U[:, :m])
    k0 = lead
    while k0 < p:
        cols = np.arange(k0, min(k0 + _block_width(m, block), p))
        m0 = m
        A = V[:, cols].copy()
        L = np.zeros((m0, len(cols)))
        for _ in range(2):  # the block on the basis as it stands
            step = U[:support, :m0].T @ A[:support]
            A[:support] -= U[:support, :m0] @ step
            L += step
        rest2 = None  # the residual norms of the loop's variables, while tracked
        if m0 and not direct:
            # no variable of the block would join the basis (the test of the
            # loop below, before any vector is added): all its rows at once
            res2 = np.einsum("ij,ij->j", A, A)
            joins = _joins(res2, sq_norm[cols], m0 < d)
            Yb = None
            if not joins.any():
                if G is None or len(G) != m0:  # C_k C_k^T, kept while the basis stands
                    G = C[:m0, :k0] @ C[:m0, :k0].T
                Yb = _dependent_block(R[:m0, :m0], G, L)
            if Yb is not None:
                C[:m0, cols] = L
                Y[cols, :m0] = Yb.T
                G += L @ L.T
                k0 += len(cols)
                if k0 < p:  # the next block's factor
                    R[:m0, :m0] = _factor_add_rows(R[:m0, :m0], L.T)
                continue
            if joins.any():
                # the variables after the last that may join are dependent:
                # the next block starts there (a variable's residual only
                # shrinks on the vectors the loop adds before it)
                last = int(np.flatnonzero(joins)[-1]) + 1
                cols, A, L = cols[:last], A[:, :last], L[:, :last]
                rest2 = res2[:last].copy()
        G = None  # the loop below changes C_k C_k^T variable by variable
        k0 += len(cols)
        # variable by variable (compiled: _linalg.min_norm_variables); with
        # rest2 tracked, once none of the block's later variables can join
        # any more, they go to the blocks (wide data: the last independent
        # variable, then only combinations of the basis)
        A, L = np.asfortranarray(A), np.ascontiguousarray(L)
        i, solved, l = 0, False, np.zeros(cap)
        while i < len(cols):
            room = min(m + len(cols) - i, p, d)  # (every variable left may join)
            if cap < room:
                while cap < room:
                    cap = min(2 * cap, p, d)
                U, C = _grown(U, (d, cap)), _grown(C, (cap, p))
                R, Y, l = _grown(R, (cap, cap)), _grown(Y, (p, cap)), _grown(l, (cap,))
            m_before = m
            status, i, m = min_norm_variables(
                U, C, R, Y, A, L, cols, sq_norm, rest2 if rest2 is not None else _NO_REST,
                rest2 is not None, l, i, m0, m, SINGULAR_TOL, solved)
            support = max(support, _support(U[:, m_before:m]))
            solved = False
            if status == MIN_NORM_SINGULAR:
                # R lost rank in floating point (predecessors whose scales
                # differ by ~1e16 or more): pinv(C_k) l_k directly
                k = cols[i]
                direct[k] = np.linalg.lstsq(C[:m, :k], l[:m], rcond=None)[0]
                solved = True
            elif status == MIN_NORM_TO_BLOCKS:
                k0 = cols[i - 1] + 1
                break
    # row k: C_k^T y_k, the columns before k of Y C (one BLAS-3 product per
    # chunk of rows, over the basis's m coordinates and the chunk's columns
    # before its last row: the rest are zeros)
    coef = np.zeros((p - first, p))
    for r0 in range(first, p, MIN_NORM_ROWS_CHUNK):
        r1 = min(r0 + MIN_NORM_ROWS_CHUNK, p)
        coef[r0 - first:r1 - first, :r1] = np.tril(Y[r0:r1, :m] @ C[:m, :r1], r0 - 1)
    for k, row in direct.items():
        coef[k - first, :k] = row
    if lead_rows is not None:
        coef[:lead - first, :lead] = lead_rows
    return coef


def _support(U):
    """1 + the last row in which a column of ``U`` is non-zero (0 for none)."""
    rows = np.flatnonzero(U.any(axis=1))
    return int(rows[-1]) + 1 if len(rows) else 0


def _block_width(m, block=None):
    """Variables of the next block on a basis of ``m`` vectors: ``block``, else ``m`` within
    ``MIN_NORM_MIN_BLOCK`` and ``MIN_NORM_BLOCK``."""
    if block is not None:
        return block
    return min(MIN_NORM_BLOCK, max(MIN_NORM_MIN_BLOCK, m))


def _joins(res2, sq_norm, room=True):
    """Whether a variable joins the basis: its squared residual ``res2`` on the
    basis keeps more than ``SINGULAR_TOL`` of its squared norm and is finite,
    and the basis has ``room`` (fewer vectors than the vectors' length).
    Elementwise on arrays."""
    return room & (res2 > SINGULAR_TOL * sq_norm) & np.isfinite(res2)


def _independent_rows(T, first):
    """Least squares of variables ``first..k-1`` on their predecessors, from ``V = Q T``.

    With ``T`` upper triangular and nonsingular (independent variables),
    ``T^T`` is a Cholesky factor of their Gram matrix, and the rows follow
    as in :func:`_ols_on_predecessors`: row ``k`` is ``-T[k, k] inv(T)[:k, k]``.
    None if the inverse is not finite.
    """
    from scipy.linalg.lapack import dtrtri

    Tinv, info = dtrtri(T, lower=0)
    if info != 0 or not np.isfinite(Tinv).all():
        return None
    return np.tril(Tinv.T[first:], first - 1) * -np.diag(T)[first:, None]


def _dependent_block(R0, G0, W, refinements=MIN_NORM_REFINEMENTS):
    """``y_k`` of :func:`_min_norm_rows` for a block of dependent variables, in BLAS-3.

    The block's variables ``k0 + i`` (coordinates ``W[:, i]``) are all exact
    combinations of a basis that stays as it is. Their systems
    ``G_k y = l_k`` share ``G_k = R0^T R0 + W_<i W_<i^T`` (``W_<i``: the
    block's columns before ``i``), which the loop of :func:`_min_norm_rows`
    updates by one rotation sweep per variable, O(m^2) each from memory. With
    ``What = R0^{-T} W``, the Woodbury form reduces every system to the
    regression of a column of ``[What; I]`` on the columns before it (a
    ridge regression on a matrix whose eigenvalues are >= 1): one Cholesky
    factor of ``What^T What + I`` and its inverse give all of them, and
    ``y = R0^{-1} (h_hat - What_<i c)``. That carries the conditioning of
    ``R0`` (the block's start), which can be far worse than ``G_k``'s, so the
    solutions are refined against the residuals ``l_k - G_k y`` computed
    from ``G0 = C_k0 C_k0^T`` and ``W`` themselves: each step multiplies the
    error by about ``eps cond(R0^T R0)``, down to the rounding of the
    residuals, which is that of the loop's normal equations.

    Parameters
    ----------
    R0 : ndarray, shape (m, m)
        Upper triangular, ``R0^T R0 = G0`` (to rounding: it only
        preconditions).
    G0 : ndarray, shape (m, m)
        ``C_k0 C_k0^T``, the coordinates of the variables before the block.
    W : ndarray, shape (m, b)
        Coordinates of the block's variables.
    refinements : int
        Most refinement steps.

    Returns
    -------
    Y : ndarray, shape (m, b) or None
        Column ``i``: ``y`` of variable ``k0 + i``. None when the block's
        systems are too ill-conditioned for this route (``R0`` singular, or
        the refinement does not converge): the caller then takes the loop.
    """
    from scipy.linalg import LinAlgError

    try:
        with np.errstate(all="ignore"):
            return _dependent_block_solve(R0, G0, W, refinements)
    except LinAlgError:  # R0 singular: the loop's own treatment
        return None


def _dependent_block_solve(R0, G0, W, refinements):
    """:func:`_dependent_block` (which catches LinAlgError and floating-point states)."""
    from scipy.linalg import cholesky, solve_triangular

    b = W.shape[1]
    What = solve_triangular(R0, W, trans="T", check_finite=False)
    if not np.isfinite(What).all():
        return None
    ridge = What.T @ What
    ridge[np.diag_indices(b)] += 1.0
    Lg = cholesky(ridge, lower=True, check_finite=False)  # LinAlgError: the caller's
    Linv = solve_triangular(Lg, np.eye(b), lower=True, check_finite=False)

    def solve(H):  # approximately G_k y_i = H[:, i], every i
        Hh = solve_triangular(R0, H, trans="T", check_finite=False)
        T = np.triu(Linv @ np.triu(What.T @ Hh, 1), 1)
        c = np.triu(Linv.T @ T, 1)  # column i: the ridge row over columns < i
        return solve_triangular(R0, Hh - What @ c, check_finite=False)

    def residual(Y):  # H - G_k y_i from the coordinates
        return W - G0 @ Y - W @ np.triu(W.T @ Y, 1)

    Y = solve(W)
    sizes = []
    for _ in range(refinements):
        if not np.isfinite(Y).all():
            return None
        step = solve(residual(Y))
        if not np.isfinite(step).all():
            return None
        sizes.append(np.max(np.abs(step).max(axis=0)
                            / np.maximum(np.abs(Y).max(axis=0), np.finfo(float).tiny)))
        Y += step
        # done: the last step was tiny (the error left is that times the
        # contraction), or the steps stall at the residuals' rounding
        if sizes[-1] <= MIN_NORM_REFINED or (len(sizes) > 1
                                             and sizes[-1] > 0.1 * sizes[-2]):
            break
    # a step of 1e-10 or more that did not shrink 1000-fold: not converging
    if sizes and sizes[-1] > max(MIN_NORM_REFINED, 1e-3 * sizes[0], 1e-10):
        return None
    return Y


def _factor_add_rows(R, X):
    """Upper ``R'`` with ``R'^T R' = R^T R + X^T X`` (one QR of ``[R; X]``, O(m^2 b))."""
    from scipy.linalg.lapack import dtpqrt

    m = R.shape[0]
    Rn, _, _, info = dtpqrt(0, max(1, min(64, m)), np.array(R, order="F"),
                            np.array(X, order="F"))
    if info != 0:
        raise np.linalg.LinAlgError(f"dtpqrt failed (info={info})")
    return np.triu(Rn)


def _grown(A, shape):
    """``A`` in the leading corner of a larger zero array (Fortran-ordered as ``A`` is)."""
    out = np.zeros(shape, order="F" if A.ndim > 1 and not A.flags.c_contiguous else "C")
    out[tuple(slice(0, s) for s in A.shape)] = A
    return out
