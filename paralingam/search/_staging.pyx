# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The CUDA upload's copies of contiguous blocks into page-locked memory, on OpenMP threads.

One core copies at about 10 GB/s, slower than the bus, and numpy's copy
runs on one. Python threads started for a small fit's upload cost more
than they saved (docs/design/pipeline.rst, "Copy threads on small data");
OpenMP's team stays alive between the parallel regions
of one upload, so each block of a few megabytes is split among its threads
for the price of waking them; :func:`release_team` ends it after the last.
"""

from cython.parallel cimport prange
from libc.string cimport memcpy

cdef extern from "_runtime.h":
    int pl_register_fork_handler()
    int pl_threads_usable() nogil
    void pl_release_team() nogil

pl_register_fork_handler()

# Bytes each thread copies at least.
MIN_PART_BYTES = 1 << 16


def copy_bytes(unsigned char[::1] dst, const unsigned char[::1] src, int n_threads):
    """Copy ``src`` into the start of ``dst``, in up to ``n_threads`` contiguous parts at once.

    Parameters
    ----------
    dst : writable contiguous buffer of bytes, at least as long as ``src``
    src : contiguous buffer of bytes
    n_threads : int
        OpenMP threads at most (each copying at least ``MIN_PART_BYTES``;
        one, outside OpenMP, in the thread that survived a fork, whose
        team's threads are gone: ``_runtime.h``).
    """
    cdef Py_ssize_t n = src.shape[0], t, a, b
    if dst.shape[0] < n:
        raise ValueError(f"copy_bytes: {n} bytes do not fit in {dst.shape[0]}")
    if n == 0:
        return
    cdef Py_ssize_t parts = max(1, min(n_threads, n // MIN_PART_BYTES))
    cdef unsigned char* d = &dst[0]
    cdef const unsigned char* s = &src[0]
    if parts == 1 or not pl_threads_usable():
        with nogil:
            memcpy(d, s, n)
        return
    for t in prange(parts, nogil=True, schedule="static", num_threads=parts):
        a = n * t // parts
        b = n * (t + 1) // parts
        memcpy(d + a, s + a, b - a)


def release_team():
    """End the calling thread's team of OpenMP threads (``pl_release_team``).

    After the last copy of an upload: a team's threads spin for some
    milliseconds after its last region, on cores the search's host loop and
    the next steps need, and a team left behind would also be stale in a
    child forked later (docs/design/runtime.rst). The next upload starts a
    new one.
    """
    with nogil:
        pl_release_team()
