"""Build paralingam: Cython extensions plus the CUDA sources in kernels/.

The package metadata (name, version, dependencies, extras, the ``paralingam``
command) is in pyproject.toml; this file only describes the compiled parts.

The CPU backend is compiled with OpenMP and -ffast-math (compile step only,
see paralingam/_cpu_kernels.h). The build is portable by default (the
compiler's baseline instruction set, so a wheel runs on any x86-64 CPU);
PARALINGAM_NATIVE=1 tunes it for the building machine's own instruction set
(-march=native, 512-bit vectors where AVX-512 is present), which only that
machine and ones like it can run. kernels/*.cu ship inside the package as
``paralingam.kernels`` so an installed wheel finds them for PyCUDA's run-time
compilation.
"""

import os
import sys

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

native = os.environ.get("PARALINGAM_NATIVE", "0") == "1"
if os.environ.get("PARALINGAM_PORTABLE"):
    print("setup.py: PARALINGAM_PORTABLE is obsolete (portable is the default; "
          "PARALINGAM_NATIVE=1 tunes for this machine)", file=sys.stderr)
# Native tuning: the machine's instruction set, and 512-bit vectors where it
# has them (GCC prefers 256 bits on Intel by default; a no-op without
# AVX-512). docs/design/cpu_search.rst has the measurements.
native_flags = ["-march=native", "-mprefer-vector-width=512"] if native else []
cpu_flags = ["-O3", "-ffast-math", "-fopenmp"] + native_flags

def nvtx_include_dir():
    """CUDA's include folder when it has the header-only NVTX3, else None."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in filter(None, roots):
        inc = os.path.join(root, "include")
        if os.path.exists(os.path.join(inc, "nvtx3", "nvToolsExt.h")):
            return inc
    return None


nvtx_inc = nvtx_include_dir()

extensions = [
    Extension(
        "paralingam._cpu",
        ["paralingam/_cpu.pyx"],
        include_dirs=[np.get_include(), "paralingam"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=cpu_flags,
        extra_link_args=["-fopenmp"],
        # glibc's vector math library, which -ffast-math loops call.
        libraries=["mvec", "m"] if sys.platform.startswith("linux") else [],
        depends=["paralingam/_cpu_kernels.h"],
    ),
    # Candidate scores of the multi-group order search (paralingam.multi_group):
    # the float64 pair statistic of _cpu_kernels.h over every group's pairs.
    Extension(
        "paralingam._multi_group",
        ["paralingam/_multi_group.pyx"],
        include_dirs=[np.get_include(), "paralingam"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=cpu_flags,
        extra_link_args=["-fopenmp"],
        libraries=["mvec", "m"] if sys.platform.startswith("linux") else [],
        depends=["paralingam/_cpu_kernels.h"],
    ),
    # The adaptive lasso of the adjacency step (a port of scikit-learn's LARS
    # path), targets in OpenMP threads. No -ffast-math: only the dot products
    # and updates of paralingam/_lasso_kernels.h are vectorised (`omp simd`),
    # the path's decisions round in program order.
    Extension(
        "paralingam._lasso",
        ["paralingam/_lasso.pyx"],
        include_dirs=["paralingam"],
        extra_compile_args=["-O3", "-fopenmp"] + (["-march=native"] if native else []),
        extra_link_args=["-fopenmp"],
        depends=["paralingam/_lasso_kernels.h"],
    ),
    # The rank-one Cholesky update of the minimum-norm least squares
    # (paralingam.adjacency, rank-deficient data).
    Extension("paralingam._linalg", ["paralingam/_linalg.pyx"], extra_compile_args=["-O3"]),
    # Host scheduler of the CUDA backend. It binds libcuda at run time
    # (dlopen), so it builds and imports without CUDA; NVTX ranges are
    # compiled in when the header-only NVTX3 is found.
    Extension(
        "paralingam._scheduler",
        ["paralingam/_scheduler.pyx"],
        # kernels/search_state.h: the search state shared with the kernels
        include_dirs=[np.get_include(), "kernels"] + ([nvtx_inc] if nvtx_inc else []),
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
        + ([("PARALINGAM_NVTX", "1")] if nvtx_inc else []),
        extra_compile_args=["-O2"],
        libraries=["dl"] if sys.platform.startswith("linux") else [],
        depends=["kernels/search_state.h"],
    ),
]

setup(
    packages=["paralingam", "paralingam.kernels", "paralingam.data"],
    package_dir={"paralingam.kernels": "kernels"},
    package_data={"paralingam.kernels": ["*.cu", "*.cuh", "*.h"], "paralingam.data": ["*.csv"]},
    ext_modules=cythonize(extensions, compiler_directives={"language_level": 3}),
    zip_safe=False,
)
