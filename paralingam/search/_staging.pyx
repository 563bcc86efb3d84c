# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The CUDA upload's copies of contiguous blocks into page-locked memory, on OpenMP threads.

One core copies at about 10 GB/s, slower than the bus, and numpy's copy
runs on one. Python threads started for a small fit's upload cost more
than they saved (docs/design/pipeline.rst, "Copy threads on small data");
OpenMP's threads stay alive between parallel regions, so a block of a few
megabytes can be split among them for the price of waking them.
"""

from cython.parallel cimport prange
from libc.string cimport memcpy

# Bytes each thread copies at least.
MIN_PART_BYTES = 1 << 16


def copy_bytes(unsigned char[::1] dst, const unsigned char[::1] src, int n_threads):
    """Copy ``src`` into the start of ``dst``, in up to ``n_threads`` contiguous parts at once.

    Parameters
    ----------
    dst : writable contiguous buffer of bytes, at least as long as ``src``
    src : contiguous buffer of bytes
    n_threads : int
        OpenMP threads at most (each copying at least ``MIN_PART_BYTES``).
    """
    cdef Py_ssize_t n = src.shape[0], t, a, b
    if dst.shape[0] < n:
        raise ValueError(f"copy_bytes: {n} bytes do not fit in {dst.shape[0]}")
    if n == 0:
        return
    cdef Py_ssize_t parts = max(1, min(n_threads, n // MIN_PART_BYTES))
    cdef unsigned char* d = &dst[0]
    cdef const unsigned char* s = &src[0]
    for t in prange(parts, nogil=True, schedule="static", num_threads=parts):
        a = n * t // parts
        b = n * (t + 1) // parts
        memcpy(d + a, s + a, b - a)
