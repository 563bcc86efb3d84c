/* State of one causal-order search on the GPU.
 *
 * Shared by the CUDA kernels (kernels/paralingam.cu) and the host scheduler
 * (paralingam/search/_scheduler.pyx), so both see one layout. The host fills the
 * constants and the buffer addresses once; the kernels keep everything else
 * on the device. The host reads only PlStatus, which lives in mapped pinned
 * host memory and is published by the `select` kernel after every round.
 *
 * Indices: "variables" are original column indices 0..p-1; "positions" index
 * the remaining variables `alive[0..r)` (ascending); "workers" index the
 * variables being compared in this iteration: one per collinear group, the
 * group's first member (`idx[w]`), ascending.
 */
#ifndef PARALINGAM_SEARCH_STATE_H
#define PARALINGAM_SEARCH_STATE_H

#include "pl_constants.h"  /* statuses, PL_DEP_*, PL_ORDER_BUCKETS */

enum {
    PL_RUNNING = 0,    /* threshold rounds go on */
    PL_DECIDED = 1,    /* the root of this iteration is known */
    PL_REDO = 2,       /* float scores too close: n_cand candidates to re-decide in double */
    PL_FINISHED = 3,   /* every variable is ordered */
    PL_DEGENERATE = 4, /* on_collinear="error" and an exact linear dependence was found */
    PL_FAILED = 5      /* no candidate to choose the root from (a bug, reported, never looped on) */
};

typedef struct {
    int seq;        /* bumped by every select: the host waits for it */
    int state;      /* PL_* */
    int iteration;  /* iteration this status belongs to */
    int r;          /* remaining variables of that iteration */
    int nw;         /* its workers */
    int n_cand;     /* PL_REDO: candidates to re-decide */
    int root;       /* PL_DECIDED: original index of the root (-1 while unknown) */
    int detail[3];  /* PL_DEGENERATE: PL_DEP_* and two variables (or -1) */
    int n_rederived;/* covariance re-derivations after drift, so far */
    int n_order;    /* variables ordered so far */
    int band_at;    /* iteration of the last covariance pass with pairs decided on the data */
} PlStatus;

typedef struct {
    int r, nw, epoch, iteration, n_order;
    int n_active;                      /* active workers of this round */
    int done, state, root, n_cand, rounds;
    int collinear;                     /* some remaining pair is collinear */
    int ordered;                       /* workers visit partners in `partner` order */
    int all_pairs;                     /* this iteration compares every pair in one round */
    int blocks_done;                   /* update_data blocks finished (the last one checks drift) */
    int workers_done;                  /* worker blocks finished (the last one selects the root; several
                                          devices: select_root's blocks) */
    int n_rederived, seq;
    unsigned long long drift_bits;     /* largest drift of the last data update (double bits) */
    unsigned long long compared;       /* comparisons done in this iteration */
    double gamma;                      /* threshold of the current round */
    int band_at;                       /* iteration of the last covariance pass with band pairs */
    int redo_chunks;                   /* pairs64's blocks per pair in this re-decision */
} PlControl;

/* The search state. Each buffer's comment starts with its extent, which
 * paralingam/search/_cuda_state.py reads: the device allocations, their
 * memory formula and the host's fill of this struct all follow from it, so
 * a buffer is added here and nowhere else. Extents: [p x ld] (rows),
 * [p x p] (pairs), [p + 1] (one entry per variable, position, worker or
 * iteration), [p x chunks] (PL_UPDATE_PARTS per chunk of each row of a
 * long-row search, PL_UPDATE_SPLIT_MIN_N), [control] (the PlControl block), [host] (PlStatus, mapped host
 * memory). Flags after the extent: "float", allocated in full only for float
 * comparisons; "device 0", held by the first device alone in a search over
 * several devices (the others use its copy); "mirror", copied from device 0
 * to the others after every prep and setup. The scalars are filled from the
 * search's settings of the same name, magic with PL_MAGIC. Every field is 8 bytes (pointers,
 * long long, double): no padding, one layout for nvcc and the host. */
typedef struct {
    /* constants */
    float *X32;            /* [p x ld] standardised rows, float copy */
    double *X64;           /* [p x ld] standardised rows */
    double *cov;           /* [p x p] correlation of the rows (original indices) */
    long long p, n, ld;
    double gamma0, c;      /* first threshold of an iteration (inf: no threshold), factor */
    double collinear_tol, explained_tol, drift_tol;
    double moment_err;     /* bound on |float - double| of one entropy moment */
    long long use_float;   /* 1: float comparisons with certified roots; 0: double */
    long long stop_on_degenerate;
    long long use_prior;   /* 1: pk_status gives the candidates (prior knowledge) */
    long long group_warps; /* warps that compare one pair together (divides WARPS) */
    /* per variable */
    int *alive;            /* [p + 1] remaining variables, ascending (length r) */
    int *gone;             /* [p + 1] 0 searching, 1 explained by the current root, 2 ordered */
    double *frac;          /* [p + 1] remaining-variance fraction */
    double *noise;         /* [p + 1] rounding noise of each row, in its standard deviations (paralingam.search.policy) */
    int *linked;           /* [p + 1] 1: has a collinear partner among the remaining */
    int *order;            /* [p + 1] causal order so far (length n_order) */
    int *explained_by;     /* [p + 1] root that completed a fully explained variable, else -1 */
    double *hx_var;        /* [p + 1] float entropy of each variable's row (standardise, update_data) */
    double *hx_var_err;    /* [p + 1] its error bound */
    double *hx64_var;      /* [p + 1] double entropy of each variable's row, from the pass that wrote it (hx64_in_update) */
    signed char *pk_status; /* [p + 1] prior knowledge of each position: PL_CANDIDATE, PL_IN_VJ, PL_OTHER */
    /* per position / worker */
    int *label;            /* [p + 1] collinear group (smallest position) of each position */
    int *scratch;          /* [p + 1] prefix sums */
    int *idx;              /* [p + 1, mirror] worker -> variable */
    double *weight;        /* [p + 1, mirror] worker -> size of its collinear group */
    int *kind;             /* [p + 1, mirror] worker -> prior-knowledge status (PL_CANDIDATE without prior knowledge) */
    double *hx;            /* [p + 1, mirror] entropy of each worker's variable (float or double math) */
    double *hx_err;        /* [p + 1, mirror] its error bound (float math) */
    double *hx64;          /* [p + 1] entropy in double (re-decisions) */
    double *score;         /* [p + 1] partial score (atomics) */
    double *err;           /* [p + 1] partial error bound of the score (atomics) */
    int *ndone;            /* [p + 1] comparisons known to each worker */
    int *cursor;           /* [p + 1] next partner offset */
    int *partner;          /* [p x p] partners of each worker, by decreasing |correlation| (row stride p) */
    unsigned int *live;    /* [p + 1] bit k: active[k] may still have work in this round */
    int *active;           /* [p + 1] workers of this round (n_active of them) */
    double *final_score;   /* [p + 1] score of a finished worker, summed in index order; -1 unfinished */
    double *final_err;     /* [p + 1] its error bound */
    int *cand;             /* [p + 1] PL_REDO: candidate workers, ascending */
    /* pairs of workers, row stride p */
    unsigned int *lock;    /* [p x p, device 0] 2 * epoch: claimed in this iteration */
    double *stat;          /* [p x p, device 0] I(a, b); stat[b, a] = -stat[a, b] */
    double *stat_err;      /* [p x p, float, device 0] error bound of I(a, b), a < b (float math) */
    double *upd_part;      /* [p x chunks] long rows' chunk sums (update_sums, update_rows) */
    /* per iteration */
    int *it_r;             /* [p + 1] */
    int *it_rounds;        /* [p + 1] */
    int *it_redo;          /* [p + 1] candidates re-decided in double (0: none) */
    long long *it_pairs64; /* [p + 1] pairs the re-decisions compared in double (pairs64; on several devices each counts its own) */
    long long *it_compared; /* [p + 1] */
    double *it_gamma;      /* [p + 1] */
    double *it_score;      /* [p + 1] */
    /* control (device) and status (mapped host memory) */
    PlControl *ctl;        /* [control] */
    PlStatus *status;      /* [host] */
    long long magic;
} PlSearch;

#define PL_MAGIC 0x5041524c494e47LL

/* A search over several devices: copies from device 0's buffers to the
 * other devices' (its control block and remaining set after a selection,
 * the workers' constants after prep), by one launch of the copy_to_peers
 * kernel of device 0, whose threads store into the peers' memory. Job j
 * copies words[j] 4-byte words from src[j] to dst[j]; the host launches
 * gridDim.y = n jobs, PL_PEER_COPIES at most per launch, of blocks of
 * PL_COPY_THREADS threads. */
#define PL_PEER_COPIES 16
#define PL_COPY_THREADS 256
typedef struct {
    unsigned long long dst[PL_PEER_COPIES];
    unsigned long long src[PL_PEER_COPIES];
    long long words[PL_PEER_COPIES];
    long long n;
} PlCopies;

/* Bit of prep's mode: the iteration compares every pair in one round, the
 * engines taking pairs in a fixed order (no claims, locks or threshold). */
#define PL_PREP_ALL_PAIRS 4

#endif
