"""One written copy of each constant of the search (kernels/pl_constants.h).

The CPU extension and the CUDA kernels include the header, Python parses it
(paralingam._constants). These tests fail when a number is written again in
another source file, when the parser would miss or misread a value, and
when the CUDA source loses a header.
"""

import re
from pathlib import Path

import numpy as np
import pytest

from paralingam import _constants, _isa, _testing
from paralingam.search import policy, reference

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "kernels" / "pl_constants.h"
SOURCE_SUFFIXES = {".py", ".pyx", ".pxd", ".pxi", ".h", ".cuh", ".cu"}


def sources():
    """The package's, kernels', tools' and benchmarks' source files, less the header."""
    out = []
    for folder in ("paralingam", "kernels", "tools", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in SOURCE_SUFFIXES and path != HEADER and path.is_file():
                out.append(path)
    assert len(out) > 20  # the walk found the tree
    return out


def test_header_parses_to_every_constant():
    values = _constants.parse(HEADER.read_text())
    assert set(values) == {
        "K1", "K2", "BETA", "H_GAUSS", "LN2", "OTHER", "IN_VJ", "CANDIDATE",
        "DEP_COLLINEAR", "DEP_EXPLAINED",
        "ROUNDING_MARGIN", "STEP_ROUNDING", "MEASURE_SLACK", "VERIFY_BAND", "VERIFY_BAND_TOL",
        "STOP_MARGIN", "ORDER_BUCKETS", "MOMENT_ERR_CPU", "MOMENT_ERR_GPU",
        "HX64_IN_UPDATE_MIN_N", "FUSED_COV_MAX_R", "FUSED_COV_SMEM",
        "UPDATE_SPLIT_MIN_N", "UPDATE_CHUNK", "UPDATE_PARTS", "UPDATE_MAX_CHUNKS", "REDO_CHUNK_MIN"}
    for name, value in values.items():
        assert getattr(_constants, name) == value
    assert type(values["ORDER_BUCKETS"]) is int and type(values["CANDIDATE"]) is int
    assert len({values["OTHER"], values["IN_VJ"], values["CANDIDATE"]}) == 3


def test_values_are_the_expressions_they_stand_for():
    # written as the doubles numpy computes, so the reference is bitwise as before
    assert _constants.H_GAUSS == 0.5 * (1.0 + np.log(2.0 * np.pi))
    assert _constants.LN2 == np.log(2.0)
    assert _constants.ROUNDING_MARGIN == 2.0 ** 15
    assert _constants.MOMENT_ERR_GPU < _constants.MOMENT_ERR_CPU  # two engines, two bounds


def test_python_modules_read_the_header():
    assert (reference.K1, reference.K2, reference.GAMMA, reference.H_GAUSS) == (
        _constants.K1, _constants.K2, _constants.BETA, _constants.H_GAUSS)
    assert (reference.OTHER, reference.IN_VJ, reference.CANDIDATE) == (
        _constants.OTHER, _constants.IN_VJ, _constants.CANDIDATE)
    assert reference.verify_band(1e-10) == _constants.VERIFY_BAND
    assert reference.verify_band(1.0) == _constants.VERIFY_BAND_TOL
    assert (policy.ROUNDING_MARGIN, policy.STEP_ROUNDING, policy.MEASURE_SLACK) == (
        _constants.ROUNDING_MARGIN, _constants.STEP_ROUNDING, _constants.MEASURE_SLACK)
    u = np.random.default_rng(0).standard_normal((2, 500))
    log_cosh = np.logaddexp(u, -u) - np.log(2.0)
    expected = (0.5 * (1.0 + np.log(2.0 * np.pi))
                - 79.047 * (log_cosh.mean(axis=-1) - 0.37457) ** 2
                - 7.4129 * (u * np.exp(-0.5 * u * u)).mean(axis=-1) ** 2)
    np.testing.assert_array_equal(reference.entropy(u), expected)  # lingam's formula, bitwise


def test_cpu_engine_reads_the_header():
    _cpu = _isa.load("search._cpu")  # the build fit uses
    x = np.random.default_rng(1).standard_normal(300)
    y = np.random.default_rng(2).standard_normal(300)
    m = _testing.pair_moments(x, y, 0.0, both=False)  # rho 0: u = x
    assert m[0] == pytest.approx(np.mean(np.logaddexp(x, -x)) - np.log(2.0), abs=1e-13)
    assert not hasattr(_cpu, "FLOAT_MOMENT_ERR")  # one name per value: MOMENT_ERR_CPU


@pytest.mark.parametrize("text, message", [
    ("#define PL_X (1.0 + 2.0)", "plain number"),
    ("#define PL_X 1.0\n#define PL_X 2.0", "defined twice"),
    ("static const double PL_X = 1.0;", "cannot read"),
    ("enum { PL_A = 0, PL_B };", "enum member"),
    ("#define K1 2.0", "cannot read"),
])
def test_parser_rejects_what_python_would_not_see(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _constants.parse(text)


def test_parser_skips_comments_guards_and_includes():
    text = ("/* a\n * comment */\n#ifndef PARALINGAM_X_H\n#define PARALINGAM_X_H\n"
            "#include <float.h>  /* eps */\n#define PL_A 2  /* two */\n"
            "enum { PL_B = 0, PL_C = 1 };\n#endif\n")
    assert _constants.parse(text) == {"A": 2, "B": 0, "C": 1}


# Literals distinctive enough to find anywhere: the entropy approximation's.
LITERALS = ["79.047", "7.4129", "0.37457", "1.41893853", "0.69314718"]
# Names under which the constants were written by hand before (Python,
# Cython or C): an assignment or #define of one of them to a number is a
# second copy.
NAMES = ("K1|K2|GAMMA|BETA|H_GAUSS|LOG2|LN2|STOP_MARGIN|REL_MARGIN|VERIFY_BAND|VERIFY_BAND_TOL|"
         "ROUNDING_MARGIN|STEP_ROUNDING|STEP_NOISE|MEASURE_SLACK|FLOAT_MOMENT_ERR|MOMENT_ERR_CPU|"
         "MOMENT_ERR_GPU|ORDER_BUCKETS|OTHER|IN_VJ|CANDIDATE")
ASSIGNED = re.compile(rf"^\s*(?:cdef\s+(?:\w+\s+)*)?(?:PL_)?(?:{NAMES})\s*=\s*\(?\s*[-+.0-9]",
                      re.M)
DEFINED = re.compile(rf"^\s*#\s*define\s+(?:PL_)?(?:{NAMES})\s+\(?\s*[-+.0-9]", re.M)
ENUM = re.compile(r"\b(?:PL_)?(?:OTHER|IN_VJ|CANDIDATE|DEP_COLLINEAR|DEP_EXPLAINED)\s*=\s*\d")


def test_each_constant_is_written_once():
    header = HEADER.read_text()
    for literal in LITERALS:
        assert literal in header
    found = []
    for path in sources():
        text = path.read_text(errors="replace")
        where = path.relative_to(ROOT)
        found += [f"{where}: {lit}" for lit in LITERALS if lit in text]
        found += [f"{where}: {m.group(0).strip()}" for m in ASSIGNED.finditer(text)]
        found += [f"{where}: {m.group(0).strip()}" for m in DEFINED.finditer(text)]
        found += [f"{where}: {m.group(0).strip()}" for m in ENUM.finditer(text)]
    assert not found, "constants of kernels/pl_constants.h written again:\n" + "\n".join(found)


def test_the_check_finds_a_copy(tmp_path):
    # the patterns above catch each way a copy was written before this header
    for text in ("K1 = 79.047", "cdef double STOP_MARGIN = 1e-9", "#define REL_MARGIN 1e-9",
                 "#define PL_ORDER_BUCKETS 256", "FLOAT_MOMENT_ERR = 5e-7",
                 "#define PL_STEP_NOISE (4.0 * 2.220446049250313e-16)",
                 "enum { PL_OTHER = 0, PL_IN_VJ = 1, PL_CANDIDATE = 2 };",
                 "    OTHER = 0", "ROUNDING_MARGIN = 2.0 ** 15"):
        assert (ASSIGNED.search(text) or DEFINED.search(text) or ENUM.search(text)
                or any(lit in text for lit in LITERALS)), text


def test_cuda_source_holds_every_header_once():
    from paralingam.search import _cuda

    src = _cuda.kernel_source()
    assert not re.search(r'^#include "', src, flags=re.M)  # all inlined: the cache key sees them
    for header in _cuda.HEADERS:
        guard = re.search(r"^#ifndef (PARALINGAM_\w+)", _constants.kernel_text(header), re.M)
        assert guard and src.count(f"#define {guard.group(1)}") == 1, header
    assert src.count("#define PL_K1 ") == 1
