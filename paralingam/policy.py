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
"""

COLLINEAR_TOL = 1e-10
EXPLAINED_TOL = 1e-10
