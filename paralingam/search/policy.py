"""Tolerances of the degenerate-data policy, shared by every backend.

Real data such as metabolic fluxes obey exact linear identities, so some
columns are linear combinations of others. DirectLiNGAM then divides by zero:
a residual of two exactly collinear variables has zero variance. paralingam
defines what happens instead, identically in the reference and all backends.

A dependence is *exact* when the residual that proves it is at the level of
the rounding error of computing it; a fixed fraction of the variance is not
such a test: one gross outlier of 1e8 among n=1000 values of order one
leaves a genuine residual at ``1e-14`` of a variable's variance (it owns
the variance), while a residual of data with exact identities is rounding
error, however small or large its fraction
(docs/design/degenerate_data.rst has the derivation and the measurements).
Every decision therefore compares the *measured* residual fraction ``f``
(the variance of ``x_i - beta x_j`` over that of ``x_i``, computed from the
data rows with the least-squares ``beta``) with the rounding noise that
forming it carries:

``noise = nu_i + nu_j + STEP_ROUNDING * eps``

where ``nu_k`` is the rounding error that variable ``k``'s current row
carries, as a fraction of its standard deviation (:func:`initial_noise`
for the data as given; each regression adds ``STEP_ROUNDING * eps`` and
divides by the standard deviation that remains, :func:`regressed_noise`).
A pair is dependent when ``f <= (ROUNDING_MARGIN * noise)**2``, i.e. its
residual is at most ``ROUNDING_MARGIN`` times its rounding noise, *and* the
fraction is within the tolerance below (:func:`is_dependent`):

``COLLINEAR_TOL``
    A pair ``(i, j)`` of remaining variables with ``f`` at or under this
    value and at rounding level is *collinear*: neither direction can be
    told apart, so the pair contributes nothing to either score
    (``I(i, j) = I(j, i) = 0``).
``EXPLAINED_TOL``
    Each time a root is regressed out of variable ``i`` its
    remaining-variance fraction is multiplied by ``f(i, root)``. When the
    product is at or under this value and ``f`` at rounding level, ``i`` is
    *fully explained* by the variables already ordered: it leaves the search
    and is placed right after the root that completed it (ascending column
    index when one root completes several).

The tolerances are upper limits only: the rounding test decides. Setting
them tiny (``1e-300``) switches the policy off.

With prior knowledge (``paralingam.prior``) each remaining variable has a
status for the next root: candidate, in ``V_j``, or other. Collinear groups
form only among variables of the same status, so that all members of a group
are compared under one rule; only candidate groups can give the root. Two
collinear variables of different statuses stay in separate groups and, like
any collinear pair, compare as ``I = 0``. A fully explained variable leaves
the search like a root does: the strong-mode partial orders that start at it
are dropped. Its place (right after the root that completed it) does not
consult the prior knowledge: a strong partial order ``(f, v)`` whose ``f``
is still in the search when ``v`` is explained is not met by the order (the
data say ``v`` is a combination of variables already ordered).

With ``fit(..., on_collinear="error")`` the first such dependence raises
:class:`LinearDependenceError` instead (engines: ``stop_on_dependence=True``).
"""

import numpy as np

from .. import _constants
from .._preparation import column_sums, float_rows

COLLINEAR_TOL = 1e-10
EXPLAINED_TOL = 1e-10

EPS = float(np.finfo(np.float64).eps)

# Bytes of data up to which initial_noise takes one call (the compiled sums,
# else the formula itself), and above which it works by groups of columns
# on threads (numpy's route: by blocks of rows of about this size, no n x p
# temporary); identical results either way. NOISE_THREAD_BYTES: bytes of
# data per thread it uses at least.
NOISE_BLOCK_BYTES = 1 << 18
NOISE_THREAD_BYTES = 1 << 24

# Rounding of one regression step, in units of eps and of the row's standard
# deviation: the difference x_i - beta x_j and the product beta x_j round
# once each (|x_i|, |beta x_j| <= the row's scale) and beta itself carries
# the rounding of two sums of products (a few eps for blocked sums).
STEP_ROUNDING = _constants.STEP_ROUNDING  # 4 (kernels/pl_constants.h)

# How far above its rounding noise a residual may be and still count as
# exact. Exact identities of flux samples (tests/data/ecoli_core_subset.npz,
# the shared n=10000 data) reached 2.6e3 times the noise: a sampler's
# identities hold to its own accumulated rounding, not to one rounding of
# the stored values. One outlier of 1e10 in n=1000 samples leaves genuine
# residuals at 5e5 times the noise (1e12: 5e3). 2**15 lies between with a
# factor of ~12 to both (docs/design/degenerate_data.rst).
ROUNDING_MARGIN = _constants.ROUNDING_MARGIN  # 2**15 (kernels/pl_constants.h)

# A pair whose 1 - rho**2, with rho computed from the rows, exceeds
# collinear_tol by more than this cannot be dependent (the absolute rounding
# error of 1 - rho**2 from the rows is a few eps, or n eps at worst): the
# backends skip measuring its residual fraction (three passes over the
# samples).
MEASURE_SLACK = _constants.MEASURE_SLACK  # kernels/pl_constants.h


def initial_noise(X, n_threads=None):
    """Rounding error of each standardised column of ``X``, in its standard deviations.

    A stored value carries a rounding error of ``eps |x|`` and centring one
    adds ``eps |mean|``: relative to the spread that is
    ``eps (rms(x) + |mean(x)|) / std(x)``. An exact identity between columns
    holds only to their storage rounding, so a column far from zero
    relative to its spread carries more.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
        Data (float64), no constant column.
    n_threads : int, optional
        Threads that share the columns of large data (default: the usable
        cores). The result does not depend on it.

    Returns
    -------
    ndarray, shape (n_features,)
    """
    return noise_and_std(X, n_threads)[0]


def noise_and_std(X, n_threads=None):
    """:func:`initial_noise` of ``X`` and ``X.std(axis=0)`` (the same bits), from the same sums.

    ``X`` may be a :class:`paralingam._preparation.ScaledData`: large data
    are then read scaled, block by block, with the bits of its ``copy()``.
    """
    from .._preparation import ScaledData

    product = isinstance(X, ScaledData)
    if not product:
        X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    small = X.nbytes <= NOISE_BLOCK_BYTES
    if small and p >= 2:  # one compiled call where it reads X: no thread, no temporaries
        sums = _compiled_sums(X, 0, p)
        if sums is not None:
            return noise_from_sums(n, *sums)
    if product and (p < 2 or small):
        X = X.copy()  # small, or one column: the formula below on the whole product
        product = False
    if not product and (not X.flags.c_contiguous or p < 2 or small):
        mean = X.mean(axis=0)
        rms = np.sqrt((X * X).mean(axis=0))
        std = X.std(axis=0)
        return EPS * (rms + np.abs(mean)) / std, std
    # The same numbers without the formula's n x p temporaries, by groups of
    # at least two columns on several threads (numpy's loops release the GIL).
    if n_threads is None:
        from .._validation import _usable_cores

        n_threads = _usable_cores()
    groups = max(1, min(n_threads, p // 2, X.nbytes // NOISE_THREAD_BYTES))
    bounds = np.linspace(0, p, groups + 1).astype(int)
    parts = [(bounds[g], bounds[g + 1]) for g in range(groups)]
    if groups == 1:
        sums = [_noise_sums(X, 0, p)]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(groups) as pool:
            sums = list(pool.map(lambda jj: _noise_sums(X, *jj), parts))
    return noise_from_sums(n, *(np.concatenate(v) for v in zip(*sums)))


def noise_from_sums(n, mean, sq, dev):
    """Noise and std of ``noise_and_std`` from the columns' means, sums of squares and of squared deviations."""
    rms = np.sqrt(sq / n)
    std = np.sqrt(dev / n)  # numpy's std: the sum of squared deviations over n, its root
    return EPS * (rms + np.abs(mean)) / std, std


def _noise_sums(X, j0, j1):
    """Means, sums of squares and sums of squared deviations of columns ``j0:j1`` (two or more).

    Bit for bit what ``X.mean(axis=0)``, ``(X * X).sum(axis=0)`` and the sum
    inside ``X.std(axis=0)`` give: numpy sums the columns of such a block of
    a C-ordered array row after row (two or more columns; a single column is
    summed pairwise), so summing each block of rows after a first row that
    holds the sums so far continues exactly those sums, the means too
    (over n, as numpy's mean). ``X`` a C-ordered array, or a ``ScaledData``
    whose rows are scaled block by block. The compiled loops
    (:func:`_compiled_sums`) take the input they read; these numpy blocks
    the rest.
    """
    n, k = X.shape[0], j1 - j0
    compiled = _compiled_sums(X, j0, j1)
    if compiled is not None:
        return compiled
    rows = max(64, NOISE_BLOCK_BYTES // (8 * k))
    buf = np.empty((rows + 1, k))
    rows_buf = np.empty((rows, k))
    mean = column_sums(X, rows, j0, j1) / n  # numpy's mean: the sum in its order, over n
    sq = np.zeros(k)  # all terms are squares (>= +0): starting from +0 changes no sum
    dev = np.zeros(k)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        block_rows = float_rows(X, r0, r1, rows_buf[:r1 - r0], j0, j1)
        m = block_rows.shape[0]
        body = buf[1:m + 1]
        buf[0] = sq
        np.multiply(block_rows, block_rows, out=body)
        sq = buf[:m + 1].sum(axis=0)
        buf[0] = dev
        np.subtract(block_rows, mean, out=body)
        np.multiply(body, body, out=body)
        dev = buf[:m + 1].sum(axis=0)
    return mean, sq, dev


def _compiled_sums(X, j0, j1):
    """``_noise_sums`` by the compiled loops of ``paralingam._column_sums`` (the same bits), or None.

    They read C-ordered float64 or float32 data, as they are or scaled by
    powers of two (a ``ScaledData`` with ``factors``), and the
    Fortran-ordered sources of such a ``ScaledData`` (a pandas frame's
    values, typically), whose sums the numpy blocks add in the same order.
    Other input takes the numpy route: a Fortran-ordered array given as it
    is takes the formula (numpy's pairwise sums), as before.
    """
    route = _compiled_route(X)
    if route is None:
        return None
    sums, source, factors = route
    if factors is None:
        factors = np.ones(source.shape[1])
    return sums(source, np.ascontiguousarray(factors, dtype=np.float64), j0, j1)


def _compiled_route(X):
    """``(loop, source, factors)`` of :func:`_compiled_sums` for ``X``, or None where they do not read it."""
    from .._preparation import ScaledData

    if isinstance(X, ScaledData):
        source, factors = X.source, X.factors
    else:
        source, factors = X, None
    if factors is None and source is not X:  # scaled by ldexp (exponents beyond +-1000)
        return None
    if not (isinstance(source, np.ndarray) and source.dtype in (np.float64, np.float32)):
        return None
    from .. import _column_sums

    if source.flags.c_contiguous:
        return _column_sums.noise_sums, source, factors
    if source.flags.f_contiguous and source is not X:
        return _column_sums.noise_sums_by_columns, source, factors
    return None


def sums_in_row_order(X):
    """Whether :func:`noise_and_std` sums each column of ``X`` sample after sample.

    Where it does (two or more columns the compiled loops read, whatever the
    data's size and the threads), any loop that adds the same values in the
    same order, rounding each operation, gets its bits: the GPU's sums over
    the uploaded data (``paralingam.search._cuda``). Elsewhere numpy's
    pairwise sums may decide them.
    """
    return X.shape[1] >= 2 and _compiled_route(X) is not None


def pair_noise(nu_a, nu_b):
    """Rounding noise of the residual of one row on another (fraction of its std)."""
    return nu_a + nu_b + STEP_ROUNDING * EPS


def is_dependent(f, frac, tol, noise):
    """The residual fraction ``f`` is an exact dependence (module docstring).

    ``frac * f <= tol`` (``frac``: the fraction left before this step, 1 for
    a pair) and ``f <= (ROUNDING_MARGIN * noise)**2``. The backends write the
    same two comparisons in the same form, so that their decisions agree.
    """
    return frac * f <= tol and f <= (ROUNDING_MARGIN * noise) * (ROUNDING_MARGIN * noise)


def regressed_noise(noise, f):
    """Noise of a row after a regression that left the fraction ``f`` of its variance."""
    return noise / np.sqrt(f)


def residual_fraction(xa, xb):
    """Variance of ``xa - beta xb`` over that of ``xa`` (least-squares ``beta``), from the rows.

    Unlike ``1 - rho**2``, whose absolute rounding error is about eps, this
    resolves fractions far below eps (an outlier that dominates the
    variance), and it does not depend on how exactly the rows are
    standardised.
    """
    a = xa - xa.mean()
    b = xb - xb.mean()
    e = a - (np.dot(a, b) / np.dot(b, b)) * b
    return float(np.dot(e, e) / np.dot(a, a))


class LinearDependenceError(ValueError):
    """An exact linear dependence, found with ``on_collinear="error"``.

    Search engines (the reference, the CPU and CUDA backends) raise it with
    column indices when asked to stop at the first dependence
    (``stop_on_dependence=True``); :func:`paralingam.fit` re-raises it with
    the column names of a DataFrame (:meth:`with_names`).

    Parameters
    ----------
    kind : {"collinear", "explained"}
        ``"collinear"``: remaining variables are copies of each other up to
        scale (``1 - rho**2 <= collinear_tol``); ``"explained"``: variables
        are fully explained by the roots already regressed out
        (remaining-variance fraction ``<= explained_tol``).
    variables : sequence of int
        ``"collinear"``: the first collinear group, i.e. the group of the
        first collinear pair in index order, ascending. ``"explained"``: the
        variables that the last root completed, ascending.
    roots : sequence of int
        The roots regressed out so far, in causal order (for
        ``"explained"``, the last one completed ``variables``).
    names : list of str, optional
        Column names used in the message.
    """

    def __init__(self, kind, variables, roots, names=None):
        if kind not in ("collinear", "explained"):
            raise ValueError(f"kind must be 'collinear' or 'explained'; got {kind!r}")
        self.kind = kind
        self.variables = tuple(int(v) for v in variables)
        self.roots = tuple(int(v) for v in roots)
        self.names = None if names is None else list(names)
        super().__init__(self._message())

    def with_names(self, names):
        """The same error, its message naming the columns ``names``."""
        return type(self)(self.kind, self.variables, self.roots, names)

    def __reduce__(self):  # keep the attributes through pickling
        return type(self), (self.kind, self.variables, self.roots, self.names)

    def _label(self, j):
        return f"column {j}" if self.names is None else f"column {j} ({self.names[j]!r})"

    def _message(self):
        cols = ", ".join(self._label(v) for v in self.variables)
        if self.roots:
            after = "after regressing out the roots " + ", ".join(
                self._label(r) for r in self.roots)
        else:
            after = "before any root was regressed out"
        if self.kind == "collinear":
            what = f"{cols} are collinear (copies of each other up to scale and offset)"
        else:
            what = f"{cols} {'is' if len(self.variables) == 1 else 'are'} fully explained"
        return (f"exact linear dependence: {what} {after}; see paralingam.search.policy, or pass "
                "on_collinear='warn' to apply the degenerate-data policy")
