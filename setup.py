"""Build paralingam: Cython extensions plus the CUDA sources in kernels/.

The CPU backend is compiled with OpenMP and -ffast-math (compile step only,
see paralingam/_cpu_kernels.h) and, unless PARALINGAM_PORTABLE=1, for the
building machine's own instruction set so glibc's AVX2/AVX-512 vector math is
used. kernels/*.cu ship inside the package as ``paralingam.kernels`` so an
installed wheel finds them for PyCUDA's run-time compilation.
"""

import os
import sys

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

portable = os.environ.get("PARALINGAM_PORTABLE", "0") == "1"
# 512-bit vectors where the machine has them (GCC prefers 256 bits on Intel
# by default): the CPU search's pair loops ran 1.15-1.3x faster in float32
# and 1.4-1.6x in float64 on a 16-core Xeon with AVX-512
# (benchmarks/ab_cpu_vector512_h100host_16cores.log); a no-op without AVX-512.
cpu_flags = ["-O3", "-ffast-math", "-fopenmp"] + (
    [] if portable else ["-march=native", "-mprefer-vector-width=512"])

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
    # The adaptive lasso of the adjacency step (a port of scikit-learn's LARS
    # path), targets in OpenMP threads. No -ffast-math: only the dot products
    # and updates of paralingam/_lasso_kernels.h are vectorised (`omp simd`),
    # the path's decisions round in program order.
    Extension(
        "paralingam._lasso",
        ["paralingam/_lasso.pyx"],
        include_dirs=["paralingam"],
        extra_compile_args=["-O3", "-fopenmp"] + ([] if portable else ["-march=native"]),
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
    name="paralingam",
    version="0.1.0",
    description="ParaLiNGAM: fast DirectLiNGAM causal discovery on CPU and GPU",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=["paralingam", "paralingam.kernels", "paralingam.data"],
    package_dir={"paralingam.kernels": "kernels"},
    package_data={"paralingam.kernels": ["*.cu", "*.cuh", "*.h"], "paralingam.data": ["*.csv"]},
    ext_modules=cythonize(extensions, compiler_directives={"language_level": 3}),
    install_requires=[
        "numpy>=1.23",
        # The estimator's default adjacency is lingam's adaptive lasso: sklearn's
        # LARS path (lars_path_gram); also BaseEstimator (get_params/set_params/clone)
        # and the bootstrap's resampling, drawn exactly as lingam draws it.
        "scikit-learn>=1.3",
        # Cholesky solves of the regressions and the gamma distribution of the
        # HSIC independence test (already required by scikit-learn).
        "scipy>=1.8",
        # One BLAS thread during the bootstrap's small linear algebra (already
        # required by scikit-learn).
        "threadpoolctl>=3.1",
    ],
    extras_require={
        "cuda": ["pycuda>=2024.1"],
        "test": ["pytest>=7", "hypothesis>=6", "lingam==1.13.0", "distributed>=2023.9"],
        # DirectLiNGAM.bootstrap(..., client=...): a Dask cluster of CPU workers,
        # or one worker per GPU with dask-cuda's LocalCUDACluster.
        "dask": ["distributed>=2023.9"],
        "dask-cuda": ["distributed>=2023.9", "dask-cuda>=23.10", "pycuda>=2024.1"],
        "bench": ["lingam==1.13.0"],
        "plot": ["graphviz"],
    },
    entry_points={"console_scripts": ["paralingam=paralingam.cli:main"]},
    zip_safe=False,
)
