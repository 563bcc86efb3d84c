"""tools/cubin_sections.py: reads the sections of an ELF file (a cubin) and
names the functions whose machine code differs."""

import importlib.util
import struct
from pathlib import Path

import pytest

_TOOL = Path(__file__).resolve().parent.parent / "tools" / "cubin_sections.py"
_spec = importlib.util.spec_from_file_location("cubin_sections", _TOOL)
cubin_sections = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cubin_sections)


def _elf(secs):
    """A 64-bit little-endian ELF file holding `secs` (name -> bytes, or an
    int: the size of an SHT_NOBITS section)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in secs) + b".shstrtab\0"
    body, headers = b"", [(0, 0, 0, 0)]  # section 0 is the null section
    pos = 1
    for n, v in secs.items():
        if isinstance(v, int):
            headers.append((pos, 8, 0, v))
        else:
            headers.append((pos, 1, 64 + len(body), len(v)))
            body += v
        pos += len(n) + 1
    headers.append((pos, 3, 64 + len(body), len(names)))
    body += names
    shoff = 64 + len(body)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    head = ident + struct.pack("<HHIQQQIHHHHHH", 1, 190, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                               len(headers), len(headers) - 1)
    table = b"".join(struct.pack("<IIQQQQIIQQ", n, t, 0, 0, off, size, 0, 0, 1, 0)
                     for n, t, off, size in headers)
    return head + body + table


def _write(tmp_path, name, secs):
    path = tmp_path / name
    path.write_bytes(_elf(secs))
    return str(path)


def test_sections_reads_contents_and_nobits_sizes():
    secs = cubin_sections.sections(_elf({".text.k": b"\x01\x02\x03", ".nv.shared.k": 5}))
    assert secs[".text.k"] == b"\x01\x02\x03"
    assert secs[".nv.shared.k"] == bytes(5)


def test_compare_names_changed_missing_and_new(tmp_path, capsys):
    ref = _write(tmp_path, "ref.cubin", {".text.a": b"\x00" * 16, ".text.b": b"\x11" * 16,
                                         ".text.c": b"\x22" * 16})
    tree = _write(tmp_path, "tree.cubin", {".text.a": b"\x00" * 16, ".text.b": b"\x11" * 8 + b"\x99" * 8,
                                           ".text.d": b"\x33" * 16})
    assert cubin_sections.main([ref, tree]) == 1
    out = capsys.readouterr().out
    assert "differs  b  (16 -> 16 bytes, first at byte 8)" in out
    assert "missing  c" in out and "new      d" in out
    assert not any(line.split()[1] == "a" for line in out.splitlines()[:-1])  # a is the same
    assert cubin_sections.main([ref, ref]) == 0


def test_resource_change_of_an_unchanged_function_is_reported(tmp_path, capsys):
    ref = _write(tmp_path, "ref.cubin", {".text.a": b"\x00" * 16, ".nv.shared.a": 8})
    tree = _write(tmp_path, "tree.cubin", {".text.a": b"\x00" * 16, ".nv.shared.a": 16})
    assert cubin_sections.main([ref, tree, "--label", "x"]) == 1
    assert "[x] differs  .nv.shared.a" in capsys.readouterr().out


def test_not_an_elf_file_is_refused():
    with pytest.raises(ValueError, match="not an ELF file"):
        cubin_sections.sections(b"PK\x03\x04" + bytes(60))
