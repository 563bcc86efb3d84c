"""Tolerances of the degenerate-data policy, shared by every backend.

Real data such as metabolic fluxes obey exact linear identities, so some
columns are linear combinations of others. DirectLiNGAM then divides by zero:
a residual of two exactly collinear variables has zero variance. paralingam
defines what happens instead, identically in the reference and all backends.

``COLLINEAR_TOL``
    A pair ``(i, j)`` of remaining variables with ``1 - rho**2`` at or under
    this value is *collinear*: neither direction can be told apart, so the pair
    contributes nothing to either score (``I(i, j) = I(j, i) = 0``).
``EXPLAINED_TOL``
    Each time a root is regressed out of variable ``i`` its remaining-variance
    fraction is multiplied by ``1 - rho(i, root)**2``. Once the fraction is at
    or under this value, ``i`` is *fully explained* by the variables already
    ordered: it leaves the search and is placed right after the root that
    completed it (ascending column index when one root completes several).

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

``1e-10`` means a residual standard deviation of ``1e-5`` of the original:
below that, a float64 residual of data recorded with about six significant
digits is rounding noise rather than signal.

With ``fit(..., on_collinear="error")`` the first such dependence raises
:class:`LinearDependenceError` instead (engines: ``stop_on_dependence=True``).
"""

COLLINEAR_TOL = 1e-10
EXPLAINED_TOL = 1e-10


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
        return (f"exact linear dependence: {what} {after}; see paralingam.policy, or pass "
                "on_collinear='warn' to apply the degenerate-data policy")
