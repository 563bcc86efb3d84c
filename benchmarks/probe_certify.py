"""How many float roots a tighter moment-error bound would certify (CPU, double arithmetic).

    python benchmarks/probe_certify.py --sizes 40x20000 40x100000 40x400000
    python benchmarks/probe_certify.py --quick

The float searches (both backends) certify each iteration's root with error
bounds: every entropy moment is taken to be off by at most ``D`` (the
moment-error constant, ``PL_MOMENT_ERR_GPU`` = 5e-7 on the GPU,
``PL_MOMENT_ERR_CPU`` = 1e-6 on the CPU; ``benchmarks/probe_float.py``
measured the GPU's worst error at about 6.3e-8), which bounds each pair's
statistic (``entropy_bound``), and so each candidate's score
(``square_bound`` summed over its partners, ``kernels/paralingam.cu``).
Where a rival's score could be below the root's within those bounds, the
candidates are re-decided in float64: on tall data nearly every iteration
(561 of 599 in the whole-job benchmark's p=600, n=500,000 case), which
costs as much as the float rounds.

This script asks whether the bounds or the data set that count. It runs
DirectLiNGAM (pwling) in double on sparse random LiNGAM data
(``make_lingam_data``, as the benchmark's tall case), and in every
iteration computes each candidate's exact score and its error bound for
several values of ``D``: an iteration needs a re-decision for ``D`` when
some rival's score minus its bound falls below the root's score plus the
root's bound (complete scores: the threshold rounds settle unfinished
rivals against the same test). ``D = 0`` needs none; if the count stays
high at the measured worst error, the leading candidates' scores are
genuinely closer than float arithmetic can resolve, and no tighter bound
removes the re-decisions. Prints a table and writes JSON.
"""

import time

import numpy as np

import _common  # (benchmarks/ is on sys.path when run as a script)
from paralingam import _constants
from paralingam.datasets import make_lingam_data

K1, K2, BETA, LN2 = _constants.K1, _constants.K2, _constants.BETA, _constants.LN2
H_GAUSS = _constants.H_GAUSS
# the moment errors compared: the CPU's and the GPU's constants, then tighter
# ones down to the GPU's measured worst error (probe_float_h100.json)
BOUNDS = (1e-6, 5e-7, 3e-7, 2e-7, 1e-7, 6.3e-8, 0.0)


def moments(U):
    """Entropy moments (E log cosh u, E u exp(-u^2/2)) of each standardised row of ``U``."""
    return (np.logaddexp(U, -U) - LN2).mean(axis=-1), (U * np.exp(-0.5 * U * U)).mean(axis=-1)


def entropy(m1, m2):
    return H_GAUSS - K1 * (m1 - BETA) ** 2 - K2 * m2 ** 2


def entropy_bound(m1, m2, D):
    """kernels/paralingam.cu's entropy_bound: |H(float moments) - H(exact)| for moments off by D."""
    return 2.0 * K1 * np.abs(m1 - BETA) * D + 2.0 * K2 * np.abs(m2) * D + (K1 + K2) * D * D


def square_bound(v, e):
    """kernels/paralingam.cu's square_bound: |min(0, I)^2 - min(0, I~)^2| for |I - I~| <= e."""
    return np.where(v < e, 2.0 * np.maximum(0.0, -v) * e + e * e, 0.0)


def iteration(Z):
    """Statistics of the standardised rows ``Z`` (r, n): stat[i, j] and the moments they come from."""
    r = Z.shape[0]
    corr = Z @ Z.T / Z.shape[1]
    hm1, hm2 = moments(Z)
    rm1, rm2 = np.zeros((r, r)), np.zeros((r, r))  # residual of i on j
    for i in range(r):
        rho = corr[i]
        scale = np.sqrt(np.maximum(1.0 - rho * rho, 1e-300))
        U = (Z[i][None, :] - rho[:, None] * Z) / scale[:, None]
        U[i] = Z[i]  # (the diagonal is no pair)
        rm1[i], rm2[i] = moments(U)
    hx = entropy(hm1, hm2)
    hres = entropy(rm1, rm2)
    # I(i, j) = H(x_j) + H(r_i^(j)) - H(x_i) - H(r_j^(i)): i's statistic against j
    stat = (hx[None, :] + hres) - (hx[:, None] + hres.T)
    np.fill_diagonal(stat, 0.0)
    return stat, (hm1, hm2, rm1, rm2)


def certification(stat, mom, D):
    """(root, rivals left uncertified) for moment error ``D``: complete scores and their bounds."""
    hm1, hm2, rm1, rm2 = mom
    hx_err = entropy_bound(hm1, hm2, D)
    res_err = entropy_bound(rm1, rm2, D)
    e = hx_err[:, None] + hx_err[None, :] + res_err + res_err.T
    np.fill_diagonal(e, 0.0)
    score = (np.minimum(0.0, stat) ** 2).sum(axis=1)
    err = square_bound(stat, e)
    np.fill_diagonal(err, 0.0)
    err = err.sum(axis=1)
    root = int(np.argmin(score))
    rivals = np.flatnonzero(score - err < score[root] + err[root])
    return root, int(len(rivals) - 1)  # (the root itself is in the list)


def probe(p, n, seed):
    X = make_lingam_data(p, n, density="sparse", random_state=seed)[0].astype(np.float64)
    remaining = list(range(p))
    redo = {D: 0 for D in BOUNDS}
    rivals = {D: 0 for D in BOUNDS}
    gaps = []
    t0 = time.perf_counter()
    while len(remaining) > 1:
        Z = X[:, remaining].T.copy()
        Z -= Z.mean(axis=1, keepdims=True)
        Z /= Z.std(axis=1, keepdims=True)
        stat, mom = iteration(Z)
        score = (np.minimum(0.0, stat) ** 2).sum(axis=1)
        ranked = np.sort(score)
        gaps.append(float((ranked[1] - ranked[0]) / max(ranked[1], 1e-300)))
        for D in BOUNDS:
            root, left = certification(stat, mom, D)
            redo[D] += left > 0
            rivals[D] += left
        root = remaining[int(np.argmin(score))]
        remaining.remove(root)
        xr = X[:, root]
        for i in remaining:  # regress the root out (the reference's update)
            c = np.cov(X[:, i], xr, bias=True)
            X[:, i] = X[:, i] - (c[0, 1] / c[1, 1]) * xr
    iterations = p - 1
    return {"p": p, "n": n, "seed": seed, "iterations": iterations,
            "seconds": time.perf_counter() - t0,
            "redo": {str(D): redo[D] for D in BOUNDS},
            "redo_fraction": {str(D): redo[D] / iterations for D in BOUNDS},
            "rivals_per_redo": {str(D): rivals[D] / redo[D] if redo[D] else 0.0 for D in BOUNDS},
            "median_relative_gap": float(np.median(gaps))}


def main():
    ap = _common.parser("probe_certify", __doc__, sizes=["40x20000", "40x100000", "40x400000"],
                        quick="one small case")
    ap.add_argument("--seed", type=int, default=1, help="the data's random_state (1: the whole-job benchmark's tall case)")
    args = ap.parse_args()
    sizes = ["20x20000"] if args.quick else args.sizes
    rows = []
    print("iterations re-decided in float64, by moment-error bound D "
          "(complete scores, double arithmetic)")
    print(f"{'p':>4} {'n':>8} " + " ".join(f"{'D=' + format(D, 'g'):>10}" for D in BOUNDS)
          + f" {'median gap':>11} {'s':>6}")
    for size in sizes:
        p, n = _common.parse_size(size)
        row = probe(p, n, args.seed)
        rows.append(row)
        print(f"{p:>4} {n:>8} " + " ".join(f"{row['redo'][str(D)]:>4}/{row['iterations']:<5}"
                                          for D in BOUNDS)
              + f" {row['median_relative_gap']:>11.2e} {row['seconds']:>6.1f}", flush=True)
    _common.write_result(args, {"bounds": list(BOUNDS), "rows": rows})


if __name__ == "__main__":
    main()
