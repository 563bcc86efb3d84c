/* What every OpenMP extension of the CPU backend shares (_cpu, _lasso,
 * _multi_group): the atomic flag loads and stores and the monotonic clock of
 * their signal polling, and the fork handler (docs/design/runtime.rst).
 *
 * The state below is static: each extension that includes this header has
 * its own copy and registers its own handler when it is imported.
 */
#ifndef PARALINGAM_RUNTIME_H
#define PARALINGAM_RUNTIME_H

#include <omp.h>
#include <pthread.h>
#include <time.h>

static inline int pl_load_int(const int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

static inline void pl_store_int(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

/* Wall-clock seconds (monotonic). */
static inline double pl_wall_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* libgomp keeps a thread's team of worker threads for its next parallel
 * region, and fork copies only the forking thread: in the child that thread
 * still holds its team, whose threads no longer exist, and its next parallel
 * region waits for them forever. The child handler records the thread that
 * survived a fork; it runs every region on one thread without entering
 * OpenMP. Threads the child starts later have no team yet and may use many. */
static pthread_t pl_fork_survivor;
static int pl_forked = 0;

static void pl_after_fork_in_child(void)
{
    pl_fork_survivor = pthread_self();
    pl_forked = 1;
}

/* Called once when the extension is imported. */
static inline int pl_register_fork_handler(void)
{
    return pthread_atfork(NULL, NULL, pl_after_fork_in_child);
}

/* 1 when the calling thread may start an OpenMP team with several threads. */
static inline int pl_threads_usable(void)
{
    return !pl_forked || !pthread_equal(pthread_self(), pl_fork_survivor);
}

/* Ends the calling thread's team of OpenMP worker threads. After its last
 * parallel region a team's threads spin for a while before they sleep
 * (libgomp: GOMP_SPINCOUNT, some milliseconds of a core each), so that the
 * next region starts at once; after a search that time is taken from the
 * work that follows it on the same cores (the adjacency step's QR beside
 * the scatter matrix, the next resample's preparation). The next region
 * starts a new team. Not in a fork's surviving thread, whose team's threads
 * no longer exist (pl_threads_usable): ending it would wait for them.
 * libgomp only (GCC 9 and later): its omp_pause_resource_all frees the
 * calling thread's team alone, so other threads' regions run on; LLVM's
 * pauses the whole runtime, and there the team is left to spin. */
static inline void pl_release_team(void)
{
#if defined(_OPENMP) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 9
    if (pl_threads_usable() && !omp_in_parallel()) omp_pause_resource_all(omp_pause_soft);
#endif
}

#endif
