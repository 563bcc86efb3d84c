/* Constants of the causal-order search, written once for every language.
 *
 * Read by the CPU extension (paralingam/search/_cpu_kernels.h, _cpu.pyx), the CUDA
 * kernels (kernels/compare.cuh, search_state.h, paralingam.cu: inlined into
 * the source that PyCUDA compiles, so they are part of its cache key) and
 * Python (paralingam/_constants.py parses this file at import: each value
 * below must stay a plain number, `#define PL_NAME number`, and the enum a
 * list of `PL_NAME = number`). tests/test_constants.py fails when one of
 * these numbers is written again elsewhere. Valid C, C++ and CUDA.
 * docs/design/constants.rst explains the arrangement.
 */
#ifndef PARALINGAM_PL_CONSTANTS_H
#define PARALINGAM_PL_CONSTANTS_H

#include <float.h>  /* DBL_EPSILON, the eps of the policy's rounding noise */

/* Hyvarinen's maximum-entropy approximation of the differential entropy
 * (lingam's `_entropy`, paper Eq. 7):
 *   H(u) = PL_H_GAUSS - PL_K1 (E log cosh u - PL_BETA)^2 - PL_K2 (E u exp(-u^2/2))^2
 * PL_H_GAUSS = (1 + log(2 pi)) / 2, the entropy of a standard Gaussian, and
 * PL_LN2 = log 2 (log cosh u = |u| + log(1 + exp(-2|u|)) - log 2), written as
 * the doubles numpy computes for those expressions. */
#define PL_K1 79.047
#define PL_K2 7.4129
#define PL_BETA 0.37457
#define PL_H_GAUSS 1.4189385332046727
#define PL_LN2 0.6931471805599453

/* Prior-knowledge status of a remaining variable (paralingam.prior): only
 * candidates can be the root; a candidate compares itself with the others
 * alone, and a partner in V_j stands in for its own residual. */
enum { PL_OTHER = 0, PL_IN_VJ = 1, PL_CANDIDATE = 2 };

/* The exact dependence a search stopped at with on_collinear="error" (the
 * CUDA status's detail[0]; paralingam.search._cuda reads it back). */
enum { PL_DEP_COLLINEAR = 1, PL_DEP_EXPLAINED = 2 };

/* Degenerate-data policy (paralingam.search.policy has the reasoning): a residual
 * fraction f is an exact dependence when f <= (PL_ROUNDING_MARGIN noise)^2,
 * where each regression adds PL_STEP_ROUNDING eps to a row's noise. */
#define PL_ROUNDING_MARGIN 32768.0 /* 2**15 */
#define PL_STEP_ROUNDING 4.0
/* A pair whose 1 - rho^2 from the rows exceeds collinear_tol by more than
 * this cannot be dependent: its residual fraction is not measured. */
#define PL_MEASURE_SLACK 1e-8
/* Pairs whose 1 - rho^2 (from the covariance update) is within
 * max(PL_VERIFY_BAND, PL_VERIFY_BAND_TOL * collinear_tol) are decided on
 * correlations recomputed from the rows: the update algebra divides a
 * pair's errors by sqrt((1 - rho_a^2)(1 - rho_b^2)) with the root. */
#define PL_VERIFY_BAND 1e-4
#define PL_VERIFY_BAND_TOL 100.0

/* A worker stops once its partial score, summed by atomics in an order that
 * depends on timing, passes gamma (1 + PL_STOP_MARGIN): the index-ordered
 * sum of the same terms differs by under r 2^-53 relative, so rounding
 * cannot stop the true root (whose ordered score is <= gamma), r up to ~1e6. */
#define PL_STOP_MARGIN 1e-9

/* Steps of |correlation| in the partner order (workers visit partners by
 * decreasing |correlation|, ties in index order). */
#define PL_ORDER_BUCKETS 256

/* Bounds on |float - double| of one mean entropy moment (mean log cosh u,
 * mean u exp(-u^2/2)) with dtype float32; every statistic carries the bound
 * they imply, and roots the bounds cannot certify are re-decided in double.
 * Two engines with different float code, so two bounds:
 * CPU (_cpu_kernels.h, pl_moments_f32): residuals formed in double, exp and
 *   log by float polynomials; a derived worst case: every rounding and
 *   approximation of a term adds up to under 5e-7 (log cosh) and 6e-7 (the
 *   other), rounded up (tests/test_cpu_float.py checks random data).
 * GPU (compare.cuh): the special-function unit's ex2/lg2.approx, a few 1e-7
 *   absolute per term, Kahan-compensated sums; not derived but measured
 *   (benchmarks/probe_float.py, results in benchmarks/results/
 *   probe_float_h100.json), with a factor of about 3 kept over the worst
 *   moment found. */
#define PL_MOMENT_ERR_CPU 1e-6
#define PL_MOMENT_ERR_GPU 5e-7

/* Rows of at least this many samples (float comparisons) get their double
 * entropy, which a re-decision needs, from the pass that writes them
 * (update_data, standardise): rows that long do not fit update_data's
 * shared-memory row cache, so it streams them from memory twice and its
 * double arithmetic has idle units to run on; and data of many samples are
 * re-decided at most iterations. Shorter rows take entropy64's own pass at
 * a re-decision. */
#define PL_HX64_IN_UPDATE_MIN_N 16384

/* Rows of at least PL_UPDATE_SPLIT_MIN_N samples are updated in chunks of
 * PL_UPDATE_CHUNK samples (an even number, a multiple of 32), a block each,
 * instead of a block per row (kernels/paralingam.cu, update_sums): late in a
 * search few rows remain, and one block per long row leaves most of the GPU
 * idle. Rows that long do not fit update_data's row cache either, which
 * reads a row once. Each chunk keeps PL_UPDATE_PARTS sums (upd_part). */
#define PL_UPDATE_SPLIT_MIN_N 16384
#define PL_UPDATE_CHUNK 8192
#define PL_UPDATE_PARTS 14
/* ...up to this many chunks a row (n up to 8,388,608): each block of a row
 * adds all of the row's chunk sums (a row's blocks read chunks^2 sums), and
 * the chunks are the grid's y (at most 65535). Longer rows take one block
 * each, as shorter ones did before the split. */
#define PL_UPDATE_MAX_CHUNKS 1024

/* A re-decision in double on long rows (whose upd_part holds the chunk sums)
 * splits each pair's samples among several blocks of pairs64, in chunks of at
 * least PL_REDO_CHUNK_MIN samples, when its pairs alone are too few blocks to
 * fill the GPU (a few hundred pairs of a few candidates, each a long series
 * of double exps); select64 adds each pair's chunk sums in chunk order. */
#define PL_REDO_CHUNK_MIN 8192

/* Searches of at most this many remaining variables update the covariance in
 * update_data's last block (update_data_fused) instead of kernel update_cov:
 * at most three 16 x 16 tiles, whose work one block does sooner than the GPU
 * ends one kernel and starts the next. update_data_fused then takes at least
 * PL_FUSED_COV_SMEM bytes of dynamic shared memory for the tiles' buffers. */
#define PL_FUSED_COV_MAX_R 32
#define PL_FUSED_COV_SMEM 6656

#endif
