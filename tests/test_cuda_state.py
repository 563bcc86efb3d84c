"""The CUDA search state's layout has one written copy: ``kernels/search_state.h``.

``paralingam.search._cuda_state`` parses the header's ``PlSearch``; the
allocations, the memory formula and the struct's fill come from it. These
tests run without a GPU: they compile the header with the C compiler and
compare every field's offset and type with the parsed layout, fill a state
and read each field back at the compiler's offset, and check the workspace
(through a stand-in for ``pycuda.driver``) and the memory formula against
what they were before the layout had one home.
"""

import re
import shutil
import struct
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from paralingam.search import _cuda_state as cs

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
HEADER = KERNELS / "search_state.h"

_CTYPES = ("float *", "double *", "int *", "unsigned int *", "signed char *", "long long *",
           "PlControl *", "PlStatus *", "long long", "double")


def _compiler():
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return name
    return None


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """What the C compiler makes of search_state.h: sizes, PL_MAGIC, and each parsed
    field's offset and type, as ``{"sizeof": ..., "fields": {name: (offset, ctype)}}``."""
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler")
    generic = ", ".join(f"{t}: \"{t}\"" for t in _CTYPES)
    lines = [f'    printf("field %s %zu %s\\n", "{f.name}", offsetof(PlSearch, {f.name}), '
             f'_Generic((((PlSearch *)0)->{f.name}), {generic}, default: "?"));'
             for f in cs.FIELDS]
    src = "\n".join([
        "#include <stddef.h>", "#include <stdio.h>", '#include "search_state.h"',
        "int main(void) {",
        '    printf("sizeof PlSearch %zu\\n", sizeof(PlSearch));',
        '    printf("sizeof PlControl %zu\\n", sizeof(PlControl));',
        '    printf("sizeof PlStatus %zu\\n", sizeof(PlStatus));',
        '    printf("magic %lld\\n", (long long)PL_MAGIC);',
        *lines, "    return 0;", "}"])
    folder = tmp_path_factory.mktemp("layout")
    (folder / "layout.c").write_text(src)
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", f"-I{KERNELS}", "layout.c", "-o", "layout"],
                   cwd=folder, check=True, capture_output=True)
    out = subprocess.run([str(folder / "layout")], check=True, capture_output=True,
                         text=True).stdout
    got = {"sizeof": {}, "fields": {}}
    for line in out.splitlines():
        word, rest = line.split(" ", 1)
        if word == "sizeof":
            name, size = rest.split()
            got["sizeof"][name] = int(size)
        elif word == "magic":
            got["magic"] = int(rest)
        else:
            name, offset, ctype = rest.split(" ", 2)
            got["fields"][name] = (int(offset), ctype)
    return got


def _offsets(fmt_codes):
    """Byte offset of each field of a native struct format, as ``struct`` lays it out."""
    return [struct.calcsize("@" + "".join(fmt_codes[:i]) + "0" + code)
            for i, code in enumerate(fmt_codes)]


CODES = list(cs.state_format(cs.FIELDS)[1:])


def test_the_parsed_layout_is_the_compilers(compiled):
    assert compiled["sizeof"]["PlSearch"] == cs.STATE_BYTES
    assert compiled["magic"] == cs.MAGIC
    for f, offset in zip(cs.FIELDS, _offsets(CODES)):
        assert compiled["fields"][f.name] == (offset, f.ctype), f.name
    # the control block and the status words hold their structs
    assert compiled["sizeof"]["PlControl"] <= cs.CONTROL_BYTES
    assert compiled["sizeof"]["PlStatus"] <= 4 * cs.STATUS_WORDS


def test_the_scheduler_is_built_against_the_same_struct():
    from paralingam.search import _scheduler

    assert _scheduler.layout_size() == cs.STATE_BYTES


def _dev_and_cfg(rng, defaults):
    dev = {f.name: int(rng.integers(1, 1 << 48)) * 256 for f in cs.BUFFERS}
    dev["status_dev"] = int(rng.integers(1, 1 << 48)) * 64
    del dev["status"]
    cfg = {"p": 1000, "n": 8191, "ld": 8192, "gamma0": float("inf"), "c": 1.5,
           "collinear_tol": 1e-10, "explained_tol": 3e-12, "drift_tol": 1e-6,
           "moment_err": 5e-7, "use_float": 1, "stop_on_degenerate": 0,
           "all_pairs_work": 1e7}  # (a setting the struct does not hold)
    if not defaults:
        cfg.update(use_prior=1, group_warps=4)
    return dev, cfg


@pytest.mark.parametrize("defaults", [True, False])
def test_pack_fills_every_field_as_the_scheduler_did(compiled, defaults):
    # the rules of the hand-written fill this replaces: each buffer from
    # dev[name], the status from dev["status_dev"], each setting from cfg[name]
    # (use_prior 0 and group_warps 1 by default), magic = PL_MAGIC
    dev, cfg = _dev_and_cfg(np.random.default_rng(int(defaults)), defaults)
    state = cs.pack(dev, cfg)
    assert len(state) == compiled["sizeof"]["PlSearch"]
    seen = 0
    for name, (offset, ctype) in compiled["fields"].items():
        code = "Q" if ctype.endswith("*") else {"long long": "q", "double": "d"}[ctype]
        (value,) = struct.unpack_from("@" + code, state, offset)
        if name == "status":
            expected = dev["status_dev"]
        elif ctype.endswith("*"):
            expected = dev[name]
        elif name == "magic":
            expected = compiled["magic"]
        elif name in ("use_prior", "group_warps") and defaults:
            expected = {"use_prior": 0, "group_warps": 1}[name]
        else:
            expected = cfg[name]
        assert value == expected and type(value) is type(expected), name
        seen += struct.calcsize(code)
    assert seen == len(state)  # no byte left unset (no padding)


def test_pack_names_a_missing_buffer_or_setting():
    dev, cfg = _dev_and_cfg(np.random.default_rng(2), True)
    with pytest.raises(KeyError, match="hx_err"):
        cs.pack({k: v for k, v in dev.items() if k != "hx_err"}, cfg)
    with pytest.raises(KeyError, match="drift_tol"):
        cs.pack(dev, {k: v for k, v in cfg.items() if k != "drift_tol"})


# The hand-written workspace this replaces (_cuda._Workspace before the
# layout had one home): the buffers and their bytes, as it allocated them.
OLD_PER_VARIABLE = {
    "alive": 4, "gone": 4, "frac": 8, "noise": 8, "linked": 4, "order": 4, "explained_by": 4,
    "pk_status": 1, "label": 4, "scratch": 4, "idx": 4, "weight": 8, "kind": 4, "hx_var": 8,
    "hx_var_err": 8, "hx64_var": 8, "hx": 8, "hx_err": 8, "hx64": 8, "score": 8, "err": 8, "ndone": 4,
    "cursor": 4, "live": 4, "active": 4, "final_score": 8, "final_err": 8, "cand": 4,
    "it_r": 4, "it_rounds": 4, "it_redo": 4, "it_pairs64": 8, "it_compared": 8, "it_gamma": 8, "it_score": 8}
OLD_MIRROR = ("idx", "kind", "weight", "hx", "hx_err")


def chunk_sums(ld):
    """Sums per variable of the chunked update (added since): 14 per chunk of 8192 samples
    of rows of 16384 samples and more, up to 1024 chunks."""
    chunks = -(-ld // 8192)
    return chunks * 14 if ld >= 16384 and chunks <= 1024 else 0


def old_workspace(p, ld, use_float, multi=False, replica=False):
    sizes = {"X64": p * ld * 8, "X32": p * ld * 4, "cov": p * p * 8, "partner": p * p * 4}
    if not replica:
        sizes.update(corr0=p * p * 8, lock=p * p * 4, stat=p * p * 8,
                     stat_err=p * p * 8 if use_float else 8)
    mirror = OLD_MIRROR if (multi or replica) else ()
    for name, size in OLD_PER_VARIABLE.items():
        if name not in mirror:
            sizes[name] = (p + 1) * size
    if mirror:
        sizes["mirror"] = sum(-(-(p + 1) * OLD_PER_VARIABLE[m] // 256) * 256 for m in mirror)
    sizes["upd_part"] = p * chunk_sums(ld) * 8
    sizes["ctl"] = 256
    sizes["search"] = (3 if replica else 2) * cs.STATE_BYTES
    return {name: max(size, 8) for name, size in sizes.items()}


GRID = [(p, n) for p in (1, 2, 3, 17, 100, 1000, 4097, 20000)
        for n in (1, 2, 31, 32, 33, 1000, 8192, 10000, 16383, 16384, 500001, 8388609)]


@pytest.mark.parametrize("multi, replica", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("use_float", [True, False])
def test_the_allocations_are_the_workspaces_before(use_float, multi, replica):
    for p, n in GRID:
        ld = cs.row_stride(n)
        plan = cs.allocations(p, ld, use_float, multi, replica)
        assert {a.name: a.nbytes for a in plan} == old_workspace(p, ld, use_float, multi, replica)
        assert len({a.name for a in plan}) == len(plan)


def test_the_mirror_block_holds_its_buffers_apart():
    p = 1000
    (block,) = [a for a in cs.allocations(p, 1024, True, multi=True) if a.name == "mirror"]
    assert sorted(name for name, _ in block.parts) == sorted(OLD_MIRROR) == sorted(cs.MIRROR)
    spans = sorted((offset, offset + (p + 1) * cs.DTYPES[name].itemsize)
                   for name, offset in block.parts)
    assert all(start % cs.MIRROR_ALIGN == 0 for start, _ in spans)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    assert spans[-1][1] <= block.nbytes


# Bytes per variable of the per-variable buffers in the formula: 192 before
# the layout had one home, 200 since hx64_var (the double entropies the
# update computes for long rows), 208 since it_pairs64 (the re-decisions'
# double comparisons per iteration).
PER_VARIABLE_BYTES = 208


def old_device_bytes(n, p, use_float=True):
    """_memory.cuda_device_bytes before the layout had one home."""
    ld = (n + 31) // 32 * 32
    pairs = p * p * (4 + 4 + 8 + (8 if use_float else 0))
    return (p * ld * (8 + 4) + 2 * 8 * p * p + pairs + p * PER_VARIABLE_BYTES + 4096
            + p * chunk_sums(ld) * 8)


def old_replica_bytes(n, p):
    """_memory.cuda_replica_bytes before the layout had one home."""
    ld = (n + 31) // 32 * 32
    return (p * ld * (8 + 4) + (8 + 4) * p * p + p * PER_VARIABLE_BYTES + 4096
            + p * chunk_sums(ld) * 8)


def test_the_memory_formula_gives_the_numbers_it_gave():
    for p, n in GRID:
        for use_float in (True, False):
            assert cs.device_bytes(n, p, use_float) == old_device_bytes(n, p, use_float), (p, n)
        assert cs.replica_bytes(n, p) == old_replica_bytes(n, p), (p, n)


def test_the_memory_formula_covers_every_allocation():
    for p, n in GRID:
        ld = cs.row_stride(n)
        for use_float in (True, False):
            need = cs.device_bytes(n, p, use_float)
            for multi in (False, True):
                assert sum(a.nbytes for a in cs.allocations(p, ld, use_float, multi)) <= need
        replica = cs.allocations(p, ld, True, multi=True, replica=True)
        assert sum(a.nbytes for a in replica) <= cs.replica_bytes(n, p)


def test_a_new_buffer_is_read_with_its_extent():
    text = HEADER.read_text().replace(
        "    double *it_score;",
        "    double *it_new;        /* [p x p, device 0] */\n    double *it_score;")
    fields = cs.parse(text)
    names = [f.name for f in fields]
    assert names.index("it_new") == [f.name for f in cs.FIELDS].index("it_score")
    new = fields[names.index("it_new")]
    assert (new.extent, new.flags, new.dtype) == ("p x p", {"device 0"}, np.float64)
    assert struct.calcsize(cs.state_format(fields)) == cs.STATE_BYTES + 8


def _fake_pycuda():
    """A stand-in for pycuda.driver that records allocations at increasing addresses."""
    drv = types.ModuleType("pycuda.driver")
    drv.allocated = []

    class Buffer(int):
        def free(self):
            pass

    def mem_alloc(nbytes):
        addr = 1 << 32 if not drv.allocated else drv.allocated[-1][0] + 4096 + drv.allocated[-1][1]
        drv.allocated.append((addr, nbytes))
        return Buffer(addr)

    def pagelocked_zeros(count, dtype, mem_flags=0):
        return types.SimpleNamespace(
            array=np.zeros(count, dtype),
            base=types.SimpleNamespace(get_device_pointer=lambda: 0xABC000))

    drv.mem_alloc = mem_alloc
    drv.pagelocked_zeros = pagelocked_zeros
    drv.host_alloc_flags = types.SimpleNamespace(DEVICEMAP=2, PORTABLE=1)
    pkg = types.ModuleType("pycuda")
    pkg.driver = drv
    return pkg, drv


@pytest.mark.parametrize("multi, replica", [(False, False), (True, False), (True, True)])
def test_the_workspace_allocates_the_plan_and_fills_a_state(monkeypatch, multi, replica):
    from paralingam.search import _cuda, _scheduler

    pkg, drv = _fake_pycuda()
    monkeypatch.setitem(sys.modules, "pycuda", pkg)
    monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
    p, ld = 37, 64
    ws = _cuda._Workspace(p, ld, True, multi=multi, replica=replica)
    plan = cs.allocations(p, ld, True, multi, replica)
    assert [size for _, size in drv.allocated] == [a.nbytes for a in plan]
    if not multi:
        assert ws.dev["status_dev"] == 0xABC000
        assert len(ws.status.array) == cs.STATUS_WORDS
    else:
        assert ws.dev["mirror_bytes"] == [a.nbytes for a in plan if a.name == "mirror"][0]
        ws.dev["status_dev"] = 0xABC000  # (the multi workspace's status word)
    held = {f.name for f in cs.BUFFERS if f.extent != "host"}
    if replica:
        held -= {f.name for f in cs.BUFFERS if "device 0" in f.flags}
        # the scheduler's replica views take exactly these from the replica
        assert set(_scheduler.REPLICA_LOCAL) == held - {"corr0"}
        assert set(_scheduler.WORKER_LOCAL) <= held
        # what the replica lacks, device 0's workspace provides
        ws.dev.update({name: 1 << 40 for name in ("lock", "stat", "stat_err")})
    assert held <= set(ws.dev)
    # each buffer lies inside its own allocation
    spans = sorted(drv.allocated)
    for name in held:
        assert any(a <= ws.dev[name] < a + size for a, size in spans), name
    dev, cfg = _dev_and_cfg(np.random.default_rng(3), False)
    assert len(cs.pack(ws.dev, cfg)) == cs.STATE_BYTES


ALIVE = "    int *alive;            /* [p + 1]"


@pytest.mark.parametrize("edit, message", [
    ((ALIVE, ALIVE.replace("[p + 1]", "[q + 1]")), "cannot read the tag"),
    ((ALIVE, ALIVE.replace("[p + 1]", "")), "needs its extent"),
    ((ALIVE, ALIVE.replace("[p + 1]", "[p + 1, shared]")), "cannot read the tag"),
    (("    long long p, n, ld;", "    long long p, n, ld; /* [p + 1] */"), "has an extent"),
    (("    long long p, n, ld;", "    int p, n, ld;"), "8-byte scalars only"),
    (("    int *cand;", "    short *cand;"), "not a known buffer type"),
    (("    int *cand;", "    int *cand, *cand2;"), "cannot read"),
    (("    int *cand;", "    int *alive;"), "declared twice"),
    (("    long long magic;", "    long long magic[2];"), "cannot read"),
])
def test_the_parser_rejects_what_it_cannot_lay_out(edit, message):
    text = HEADER.read_text()
    assert edit[0] in text
    with pytest.raises(ValueError, match=re.escape(message)):
        cs.parse(text.replace(edit[0], edit[1], 1))


def test_the_parser_names_the_line():
    text = HEADER.read_text().replace("    int *cand;", "    short *cand;", 1)
    line = next(i for i, raw in enumerate(text.splitlines(), 1) if "short *cand;" in raw)
    with pytest.raises(ValueError, match=f"search_state.h line {line}:"):
        cs.parse(text)


def test_no_other_source_lists_the_buffers():
    # the buffers' names and sizes were written by hand in _cuda.py, _memory.py
    # and _scheduler.pyx's fill: now only kernels and the scheduler's
    # multi-device views name them
    for path in ("paralingam/search/_cuda.py", "paralingam/_memory.py"):
        text = (ROOT / path).read_text()
        assert "PER_VARIABLE" not in text and "p * 192" not in text, path
        assert '"hx_var_err"' not in text and '"final_score"' not in text, path
    sched = (ROOT / "paralingam/search/_scheduler.pyx").read_text()
    assert "h.alive" not in sched and "double *hx_var_err" not in sched


# ---------------------------------------------------------------- on the GPU


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_state_on_the_device_is_the_packed_layout(dtype):
    # after a search, the PlSearch the scheduler uploaded reads back, field by
    # field, as the workspace's addresses and the search's shape
    import pycuda.driver as drv

    import paralingam
    from paralingam.search import _cuda

    rng = np.random.default_rng(5)
    n, p = 300, 7
    X = rng.uniform(size=(n, p)) @ np.triu(rng.uniform(0.5, 1.5, (p, p)))
    got_order = paralingam.fit(X, backend="cuda", dtype=dtype).causal_order
    assert sorted(got_order) == list(range(p))
    key = (_cuda._context().handle, p, cs.row_stride(n), dtype == "float32")
    ws = _cuda._WORKSPACES[key]
    raw = np.empty(cs.STATE_BYTES, np.uint8)
    drv.memcpy_dtoh(raw, ws.dev["search"])
    state = dict(zip([f.name for f in cs.FIELDS],
                     struct.unpack(cs.state_format(cs.FIELDS), raw.tobytes())))
    for f in cs.FIELDS:
        if f.pointer:
            assert state[f.name] == ws.dev["status_dev" if f.name == "status" else f.name], f.name
    assert (state["p"], state["n"], state["ld"]) == (p, n, cs.row_stride(n))
    assert (state["use_float"], state["magic"]) == (int(dtype == "float32"), cs.MAGIC)


@pytest.mark.parametrize("threads", [1, 2, 4, 7])
@pytest.mark.parametrize("layout", ["C", "F", "strided", "reversed"])
@pytest.mark.parametrize("rows", [1, 3, 50])
def test_the_uploads_threaded_copy_is_numpys(threads, layout, rows):
    # _cuda._copy_rows splits a block's rows among the upload's threads:
    # whatever the source's layout and however few rows, the block is the copy
    from concurrent.futures import ThreadPoolExecutor

    from paralingam.search import _cuda

    rng = np.random.default_rng(rows * 10 + threads)
    base = rng.standard_normal((2 * rows + 1, 9))
    src = {"C": base[:rows], "F": np.asfortranarray(base[:rows]),
           "strided": base[1::2, ::2][:rows], "reversed": base[::-1, ::-1][:rows]}[layout]
    dst = np.full(src.shape, np.nan)
    with ThreadPoolExecutor(threads) as pool:
        _cuda._copy_rows(dst, src, pool if threads > 1 else None, threads)
    assert dst.tobytes() == np.ascontiguousarray(src).tobytes()


def test_the_upload_cuts_fortran_data_into_whole_variables():
    # a pandas frame's values (Fortran order) go by whole variables, each a
    # contiguous range, without the host's copy against the order; C order,
    # or a variable larger than a block, by whole sample rows
    from paralingam.search import _cuda

    F = np.zeros((1000, 37), order="F", dtype=np.float32)
    by_variables, source, unit_bytes, per_block = _cuda._upload_units(F, 1 << 14)
    assert by_variables and source.shape == (37, 1000) and source.flags.c_contiguous
    assert (unit_bytes, per_block) == (4000, 4)
    C = np.ascontiguousarray(F)
    by_variables, source, unit_bytes, per_block = _cuda._upload_units(C, 1 << 14)
    assert not by_variables and source.shape == (1000, 37)
    assert (unit_bytes, per_block) == (148, (1 << 14) // 148)
    assert not _cuda._upload_units(F, 3999)[0]
    assert _cuda._upload_units(F, 1 << 30)[3] == 37  # no more than the data


def test_the_upload_copies_with_threads_only_large_data_of_several_blocks(monkeypatch):
    # starting and feeding the copy threads costs more than they save on small
    # data (docs/design/pipeline.rst, "Copy threads on small data")
    from paralingam._validation import _usable_cores
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "UPLOAD_COPY_THREADS", 4)
    big = _cuda.UPLOAD_COPY_THREADS_MIN_BYTES
    assert _cuda._copy_threads(big - 1, True, 100) == 1
    assert _cuda._copy_threads(big, False, 100) == 1
    assert _cuda._copy_threads(big, True, 100) == min(4, _usable_cores())
    assert _cuda._copy_threads(big, True, 2) == min(2, _usable_cores())


@pytest.mark.parametrize("threaded", [False, True])
def test_the_upload_sums_the_noise_beside_it_from_the_threshold_on(monkeypatch, threaded):
    # one rule for one GPU and several (search() and _search_multi_run): the
    # noise's sums run on a thread while the upload goes, from
    # UPLOAD_NOISE_THREAD_MIN_BYTES on, else after it on the calling thread
    import threading

    from paralingam.search import _cuda
    from paralingam.search.policy import noise_and_std

    X = np.random.default_rng(3).standard_normal((500, 7)) * np.arange(1, 8)
    monkeypatch.setattr(_cuda, "UPLOAD_NOISE_THREAD_MIN_BYTES",
                        X.nbytes if threaded else X.nbytes + 1)
    seen = {}
    real = _cuda.noise_and_std

    def sums(data):
        seen["thread"] = threading.current_thread() is not threading.main_thread()
        seen["after_upload"] = seen.get("uploads", 0) == 1
        return real(data)

    def upload_all():
        seen["uploads"] = seen.get("uploads", 0) + 1

    monkeypatch.setattr(_cuda, "noise_and_std", sums)
    noise, std = _cuda._upload_with_noise(X, upload_all)
    expected_noise, expected_std = noise_and_std(X)
    assert seen["uploads"] == 1 and seen["thread"] == threaded
    if not threaded:
        assert seen["after_upload"]
    assert noise.shape == (8,) and noise[-1] == 0.0
    np.testing.assert_array_equal(noise[:-1], expected_noise)
    np.testing.assert_array_equal(std, expected_std)


@pytest.mark.parametrize("staging_threads", [4, 1])
@pytest.mark.parametrize("kind", ["float64", "float32", "read-only", "strided", "one row"])
def test_a_small_uploads_blocks_are_copied_whole_on_openmp_threads(monkeypatch, kind,
                                                                   staging_threads):
    # _copy_rows without a pool: contiguous blocks by _staging.copy_bytes's
    # parts (several at 2.4 MB), other blocks by numpy; the same bytes
    from paralingam.search import _cuda, _staging

    rng = np.random.default_rng(7)
    src = rng.standard_normal((1001, 301))
    if kind == "float32":
        src = src.astype(np.float32)
    elif kind == "read-only":
        src.flags.writeable = False
    elif kind == "strided":
        src = rng.standard_normal((1001, 602))[:, ::2]
    elif kind == "one row":
        src = src[:1]
    calls, real = [], _staging.copy_bytes
    monkeypatch.setattr(_staging, "copy_bytes", lambda *a: calls.append(a[2]) or real(*a))
    dst = np.full(src.shape, np.nan, dtype=src.dtype)
    _cuda._copy_rows(dst, src, None, 1, staging_threads)
    assert dst.tobytes() == np.ascontiguousarray(src).tobytes()
    contiguous = kind != "strided"
    assert len(calls) == (1 if contiguous and staging_threads > 1 else 0)


class _FakeUploadDriver:
    """The parts of ``pycuda.driver`` that ``_cuda.upload`` calls, keeping the blocks it sends."""

    def __init__(self):
        self.sent = []
        self.allocated = []

    class Stream:
        def synchronize(self):
            pass

    class Event:
        def record(self, stream):
            pass

        def synchronize(self):
            pass

    def memset_d32_async(self, *args):
        pass

    def pagelocked_empty(self, size, dtype):
        return np.empty(size, dtype=dtype)

    def memcpy_htod_async(self, dev, host, stream):
        self.sent.append((dev, host.copy()))  # (the host buffer is reused for a later block)

    class MemoryError(Exception):
        pass

    full = False  # (True: mem_alloc raises MemoryError, as on a full device)

    def mem_alloc(self, size):
        if self.full:
            raise self.MemoryError("cuMemAlloc failed: out of memory")
        # (addresses no buffer of the stand-in workspace has)
        buf = _FakeDeviceBuffer((1 << 40) + (len(self.allocated) << 30), size)
        self.allocated.append(buf)
        return buf


class _FakeDeviceBuffer:
    """A stand-in of a pycuda ``DeviceAllocation``: its address and size, and whether freed."""

    def __init__(self, address, size):
        self.address, self.size, self.freed = address, size, False

    def __int__(self):
        return self.address

    def free(self):
        self.freed = True


def _upload_on_stand_ins(monkeypatch, X, staging_threads, uploads=1, full=False):
    """``_cuda.upload`` of ``X``, ``uploads`` times, on stand-ins of the driver and kernels
    (``full``: a device without room for another buffer).

    Returns the ``(device address, bytes)`` of each block sent, the
    ``"copy"`` and ``"release"`` calls of ``_staging`` in order, the
    stand-in workspace and the driver.
    """
    import sys
    import types

    from paralingam.search import _cuda, _staging

    drv = _FakeUploadDriver()
    drv.full = full
    pycuda = types.ModuleType("pycuda")
    pycuda.driver = drv
    monkeypatch.setitem(sys.modules, "pycuda", pycuda)
    monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
    kernel = types.SimpleNamespace(prepared_async_call=lambda *a, **k: None)
    kernels = {"scaled": {np.dtype(np.float64): kernel}, np.dtype(np.float64): kernel}
    monkeypatch.setattr(_cuda, "_prepare_kernels", lambda handle: kernels)
    monkeypatch.setattr(_cuda, "_context", lambda: types.SimpleNamespace(handle=1))
    monkeypatch.setattr(_cuda, "UPLOAD_STAGING_THREADS", staging_threads)
    events = []
    copy, release = _staging.copy_bytes, _staging.release_team
    monkeypatch.setattr(_staging, "copy_bytes", lambda *a: events.append("copy") or copy(*a))
    monkeypatch.setattr(_staging, "release_team", lambda: events.append("release") or release())
    n, p = X.shape
    ws = types.SimpleNamespace(p=p, ld=_cuda.row_stride(n), dev={"X64": 0, "X32": 1 << 20},
                               upload_buf=None, upload_buf_half=0, keep=[])
    for _ in range(uploads):
        _cuda.upload(ws, X)
    return drv.sent, events, ws, drv


@pytest.mark.parametrize("staging_threads", [4, 1])
def test_an_upload_sends_every_row_and_ends_its_copy_threads_team(monkeypatch, staging_threads):
    # _cuda.upload on stand-ins of the driver and kernels: the blocks it sends
    # are the data's rows, copied by _staging's OpenMP threads, whose team it
    # ends after the last block (a team left behind spins on the cores the
    # search needs, and is stale in a child forked later)
    from paralingam.search import _cuda

    X = np.random.default_rng(8).standard_normal((4000, 40))  # several blocks of 1000 rows
    monkeypatch.setattr(_cuda, "UPLOAD_BLOCK_BYTES", 1000 * 40 * 8)
    monkeypatch.setattr(_cuda, "UPLOAD_ONE_BLOCK_BYTES", 0)  # (1.3 MB: one block otherwise)
    sent, events, ws, _ = _upload_on_stand_ins(monkeypatch, X, staging_threads)
    assert len(sent) == 4
    assert np.concatenate([block for _, block in sent]).tobytes() == X.tobytes()
    # through X32's two halves in turn
    half = 40 * ws.ld * 2
    assert [dev for dev, _ in sent] == [(1 << 20) + half * (k % 2) for k in range(4)]
    if staging_threads > 1:
        assert events == ["copy"] * 4 + ["release"]
    else:
        assert events == []


@pytest.mark.parametrize("rows", [4000, 1])
def test_a_small_upload_goes_in_one_block_without_a_team_of_threads(monkeypatch, rows):
    # data under UPLOAD_ONE_BLOCK_BYTES: one block, through the workspace's
    # own buffer (allocated once, kept with the workspace's), copied by the
    # calling thread: no OpenMP team to start and end
    from paralingam.search import _cuda

    X = np.random.default_rng(9).standard_normal((rows, 40))
    assert X.nbytes < _cuda.UPLOAD_ONE_BLOCK_BYTES
    sent, events, ws, drv = _upload_on_stand_ins(monkeypatch, X, 4, uploads=2)
    assert [dev for dev, _ in sent] == [1 << 40] * 2
    assert sent[0][1].tobytes() == sent[1][1].tobytes() == X.tobytes()
    assert events == []
    buf, = drv.allocated  # (once, for both uploads)
    assert ws.keep == [ws.upload_buf] == [buf] and buf.size == 2 * _cuda.UPLOAD_ONE_BLOCK_BYTES
    # a larger setting later in the process: a buffer of its size, the old one freed
    monkeypatch.setattr(_cuda, "UPLOAD_ONE_BLOCK_BYTES", 4 * _cuda.UPLOAD_ONE_BLOCK_BYTES)
    _cuda.upload(ws, X)
    old, new = drv.allocated
    assert old.freed and not new.freed and ws.keep == [new] == [ws.upload_buf]
    assert new.size == 2 * _cuda.UPLOAD_ONE_BLOCK_BYTES and sent[-1][0] == int(new)


def test_copy_bytes_splits_among_threads_and_refuses_a_short_destination():
    from paralingam.search import _staging

    src = np.arange(3 * _staging.MIN_PART_BYTES + 7, dtype=np.uint64).view(np.uint8)
    for threads in (1, 2, 3, 64):
        dst = np.zeros(src.size + 5, dtype=np.uint8)
        _staging.copy_bytes(dst, src, threads)
        assert dst[:src.size].tobytes() == src.tobytes() and not dst[src.size:].any()
    with pytest.raises(ValueError, match="do not fit"):
        _staging.copy_bytes(np.zeros(3, dtype=np.uint8), src, 2)
    _staging.copy_bytes(np.zeros(0, dtype=np.uint8), src[:0], 4)  # (nothing to copy)


def _scaled(X, order="C"):
    from paralingam._preparation import ScaledData

    source = np.asfortranarray(X) if order == "F" else np.ascontiguousarray(X)
    return ScaledData(source, np.arange(X.shape[1]) - 3)


def test_the_noise_sums_count_as_in_row_order_where_the_compiled_loops_read_the_data():
    # sums_in_row_order: the host sums each column sample after sample (the
    # compiled loops, any size), so that the device's sums in that order give
    # its bits; numpy's formula (pairwise sums) decides the others
    from paralingam.search.policy import sums_in_row_order

    X = np.random.default_rng(5).standard_normal((300, 6))
    assert sums_in_row_order(X)
    assert sums_in_row_order(X.astype(np.float32))
    assert sums_in_row_order(_scaled(X)) and sums_in_row_order(_scaled(X, "F"))
    assert not sums_in_row_order(np.asfortranarray(X))  # given as it is: the formula
    assert not sums_in_row_order(X[::2])                # strided
    assert not sums_in_row_order(X[:, :1])              # one column: numpy sums it pairwise
    assert not sums_in_row_order(X.astype(np.float16))


@pytest.mark.parametrize("case", ["C", "float32", "scaled", "scaled F", "F", "one column",
                                  "switched off", "threaded"])
def test_small_data_in_row_order_take_the_devices_sums_after_the_upload(monkeypatch, case):
    # _upload_with_noise calls device_sums() after the upload for data below
    # the thread's threshold that the host sums in row order, and builds the
    # noise and std from them as noise_and_std does from its own sums;
    # otherwise the host sums as before
    from paralingam.search import _cuda, policy

    X = np.random.default_rng(6).standard_normal((400, 5)) * [1, 1e3, 1e-3, 7, 1e8]
    data = {"C": X, "float32": X.astype(np.float32), "scaled": _scaled(X),
            "scaled F": _scaled(X, "F"), "F": np.asfortranarray(X), "one column": X[:, :1],
            "switched off": X, "threaded": X}[case]
    expected = case in ("C", "float32", "scaled", "scaled F")
    if case == "switched off":
        monkeypatch.setattr(_cuda, "DEVICE_NOISE_SUMS", False)
    if case == "threaded":
        monkeypatch.setattr(_cuda, "UPLOAD_NOISE_THREAD_MIN_BYTES", 1)
    events = []

    def device_sums():  # the host's compiled sums stand in for the device's (the same bits)
        events.append("device sums")
        return policy._compiled_sums(data, 0, data.shape[1])

    noise, std = _cuda._upload_with_noise(data, lambda: events.append("upload"), device_sums)
    assert events == (["upload", "device sums"] if expected else ["upload"])
    host_noise, host_std = policy.noise_and_std(data)
    assert noise[:-1].tobytes() == host_noise.tobytes() and noise[-1] == 0.0
    assert std.tobytes() == host_std.tobytes()


def test_a_failed_upload_leaves_no_noise_thread_behind(monkeypatch):
    # an upload that raises (a fault, Ctrl-C) propagates; the noise's thread
    # has ended by then (the pool is left only after its sums)
    import threading

    from paralingam.search import _cuda

    X = np.random.default_rng(4).standard_normal((300, 5))
    monkeypatch.setattr(_cuda, "UPLOAD_NOISE_THREAD_MIN_BYTES", 1)
    before = threading.active_count()

    def upload_all():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _cuda._upload_with_noise(X, upload_all)
    assert threading.active_count() == before


def test_a_small_upload_on_a_full_device_goes_through_the_float_rows(monkeypatch):
    # no room for the one block's buffer: the upload takes X32's halves
    # (memory the workspace already holds), with the same bytes
    from paralingam.search import _cuda

    X = np.random.default_rng(10).standard_normal((4000, 40))
    assert X.nbytes < _cuda.UPLOAD_ONE_BLOCK_BYTES
    monkeypatch.setattr(_cuda, "UPLOAD_BLOCK_BYTES", 1000 * 40 * 8)
    sent, events, ws, drv = _upload_on_stand_ins(monkeypatch, X, 1, full=True)
    half = 40 * ws.ld * 2
    assert [dev for dev, _ in sent] == [(1 << 20) + half * (k % 2) for k in range(4)]
    assert np.concatenate([block for _, block in sent]).tobytes() == X.tobytes()
    assert ws.upload_buf is None and ws.keep == [] and drv.allocated == []
