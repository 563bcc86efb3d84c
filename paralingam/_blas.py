"""How many threads numpy's and scipy's BLAS may use in each step.

numpy's and scipy's wheels each bring an OpenBLAS, whose worker threads
spin for about 0.1 s after every multi-threaded call. Beside the CPU
search's OpenMP threads, or beside the other library's spinning workers
(least squares on rank-deficient data alternate between numpy's QR and
products and scipy's triangular solves and ``dtpqrt``), they take the cores
the work needs, and small steps ran several times slower with threads than
without (docs/design/adjacency.rst, "Two BLAS libraries after a CUDA
search"). The steps therefore limit them, with the contexts below.
"""

import contextlib
import os
import sys
import threading

from . import _lapack

# The adjacency step of fewer variables than this runs every BLAS in the
# calling thread (after a CPU search, every size does); from this size on,
# numpy's BLAS keeps its threads for the large products of wide data, and
# scipy's own BLAS runs in the calling thread.
THREADED_BLAS_MIN_FEATURES = 1000
# ... unless fewer than this many variables are left when the search's
# exactly explained ones are taken out: the least squares' basis, whose
# size sets the products' (rank-deficient data: on p=1000 with 76 of them
# numpy's threads lost in the step itself, and their spinning slowed the
# adaptive lasso and the next fit; wide data of 999 and 1499 gained;
# docs/design/adjacency.rst, "Threads by the basis").
THREADED_BLAS_MIN_BASIS = 500

_controller = None
_controller_libraries = None
_scipy_controller = None
_scipy_of = None


def controller():
    """The threadpoolctl controller of numpy's and scipy's BLAS (made again once scipy's is loaded).

    A controller made before scipy's LAPACK module (``paralingam._lapack``,
    with scipy's own BLAS where its wheel ships one) is loaded cannot limit
    that BLAS, so the controller is made again once the module is loaded.
    The adjacency step loads the module, before its limits, not earlier:
    loading it starts that BLAS's worker threads, which spin for about 0.1 s,
    and beside the first search's OpenMP threads they made the first fit on
    2 cores 5 times slower (docs/design/cpu_search.rst). The controller is
    kept: threadpoolctl scans the loaded libraries when it makes one, a cost
    of the order of a small search.
    """
    global _controller, _controller_libraries
    flapack = sys.modules.get(_lapack.MODULE)  # None until the adjacency step loads it
    if _controller is None or _controller_libraries is not flapack:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
        _controller_libraries = flapack
    return _controller


def in_this_thread():
    """A context in which numpy's and scipy's BLAS run in the calling thread only.

    After the covariance product OpenBLAS's spinning workers took the cores
    the CPU search's OpenMP threads need, and the search's own threads,
    spinning after it, slow multi-threaded BLAS in the adjacency step
    (docs/design/cpu_search.rst, "The pair loop"). Shared with the steps
    that overlap it (:data:`_shared_limit`).
    """
    return _shared_limit(_one_thread_everywhere)


def scipy_in_this_thread():
    """A context in which scipy's own BLAS (where it ships one) runs in the calling thread only.

    numpy's BLAS keeps its threads for the large products. Where scipy uses
    numpy's BLAS (one library), this limits nothing. Shared as
    :func:`in_this_thread`.
    """
    return _shared_limit(_one_thread_in_scipy)


def _one_thread_everywhere():
    return controller().limit(limits=1, user_api="blas")  # (applied as it is made)


def _one_thread_in_scipy():
    own = scipy_blas()
    return own.limit(limits=1) if own is not None else contextlib.nullcontext()


def scipy_blas():
    """The controller of scipy's own BLAS libraries (:func:`controller`'s), or None where it has none."""
    global _scipy_controller, _scipy_of
    whole = controller()
    if _scipy_of is not whole:
        import scipy

        root = os.path.realpath(os.path.dirname(scipy.__file__))
        own = [lib.filepath for lib in whole.lib_controllers
               if lib.user_api == "blas" and os.path.realpath(lib.filepath).startswith(root)]
        _scipy_controller = whole.select(filepath=own) if own else None
        _scipy_of = whole
    return _scipy_controller


class SharedLimit:
    """One threadpoolctl limit for the steps that overlap, in one thread or several.

    threadpoolctl's limits hold for the whole process, and each restores on
    exit the threads it found on entry; threadpoolctl (3.8) also lets only
    one thread at a time set OpenBLAS's threads, the one whose limit came
    first, until it has restored them. Steps overlapping in several threads,
    each with a limit of its own, therefore left the process's BLAS on one
    thread for good (the last one out "restored" the one thread it had
    found, once the first had let go of the control). Here the first step
    in makes the limit (``make()``, a threadpoolctl limiter, applied as it
    is made, or a ``nullcontext``) and restores it when it leaves; the steps
    that come in while it holds share it and leave it alone. A step still
    running after the first has left runs without a limit (slower, never
    wrong); the next step to come in makes a new one. One instance serves
    every kind of step (:data:`_shared_limit`), so that no two limits can
    restore each other's threads.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._limiter = None

    @contextlib.contextmanager
    def __call__(self, make):
        with self._lock:
            mine = self._limiter is None
            if mine:
                self._limiter = make()
        try:
            yield
        finally:
            if mine:
                with self._lock:
                    restore = getattr(self._limiter, "restore_original_limits", None)
                    if restore is not None:  # (a nullcontext limits nothing)
                        restore()
                    self._limiter = None


_shared_limit = SharedLimit()


def for_adjacency(n_features, after_cpu_search=False, n_explained=0):
    """The BLAS limits of an adjacency step over ``n_features`` variables.

    Every BLAS in the calling thread after a CPU search, below
    ``THREADED_BLAS_MIN_FEATURES``, or where the variables that are not
    exactly explained by earlier ones (``n_features - n_explained``, the
    search's count) are fewer than ``THREADED_BLAS_MIN_BASIS``; else
    scipy's own BLAS only. Loads scipy's LAPACK module first, so that its
    BLAS is limited too. Steps that overlap in several threads share the
    first one's limit (:class:`SharedLimit`).
    """
    _lapack.flapack()
    if (after_cpu_search or n_features < THREADED_BLAS_MIN_FEATURES
            or n_features - n_explained < THREADED_BLAS_MIN_BASIS):
        return in_this_thread()
    return scipy_in_this_thread()
