"""Compare the machine code of two cubins function by function.

A cubin is an ELF file with one ``.text.<name>`` section per kernel (and
per device function nvcc did not inline). Two builds whose ``.text``
sections hold the same bytes run the same instructions, even when the
files differ elsewhere (symbol order, notes). Needs no CUDA tools: the ELF
section table is read with the standard library (pyelftools is not a
dependency of the project).

    python tools/cubin_sections.py REF.cubin TREE.cubin [--label NAME]

prints one line per function whose machine code differs, is missing or is
new, one per resource section (``.nv.info.<f>``: registers, stack;
``.nv.shared.<f>``: static shared memory; ``.nv.constant0.<f>``) that differs
for a function whose code does not, and a summary; exits 1 when anything
differs.
"""

from __future__ import annotations

import argparse
import struct
import sys

_ELF_MAGIC = b"\x7fELF"
_TEXT = ".text."
_RESOURCES = (".nv.info.", ".nv.shared.", ".nv.constant0.")


def sections(data: bytes) -> dict[str, bytes]:
    """Name -> contents of every section of a 64-bit little-endian ELF file.

    Parameters
    ----------
    data : bytes
        The file's contents (a cubin).

    Returns
    -------
    dict of str to bytes
        Sections without file contents (``SHT_NOBITS``) map to as many
        zero bytes as their size, so that a size change shows.

    Raises
    ------
    ValueError
        If ``data`` is not a 64-bit little-endian ELF file.
    """
    if data[:4] != _ELF_MAGIC:
        raise ValueError("not an ELF file (a cubin is one: compile with nvcc -cubin)")
    if data[4] != 2 or data[5] != 1:
        raise ValueError("only 64-bit little-endian ELF files (cubins) are read")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = []
    for i in range(shnum):
        # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size
        name, kind, _flags, _addr, offset, size = struct.unpack_from(
            "<IIQQQQ", data, shoff + i * shentsize)
        headers.append((name, kind, offset, size))
    _, _, str_off, str_size = headers[shstrndx]
    names = data[str_off:str_off + str_size]
    out = {}
    for name, kind, offset, size in headers:
        label = names[name:names.index(b"\0", name)].decode()
        # SHT_NOBITS (8, e.g. .nv.shared.<kernel>) has a size but no contents
        out[label] = bytes(size) if kind == 8 else data[offset:offset + size]
    return out


def text_sections(path: str) -> dict[str, bytes]:
    """Function name -> machine code (its ``.text.<name>`` section) of a cubin."""
    with open(path, "rb") as f:
        secs = sections(f.read())
    return {k[len(_TEXT):]: v for k, v in secs.items() if k.startswith(_TEXT)}


def resource_sections(path: str) -> dict[str, bytes]:
    """Per-function resources of a cubin: ``.nv.info.<name>`` (registers,
    stack, parameter layout), ``.nv.shared.<name>`` (static shared memory)
    and ``.nv.constant0.<name>`` (the parameter bank), keyed by section name."""
    with open(path, "rb") as f:
        secs = sections(f.read())
    return {k: v for k, v in secs.items() if k.startswith(_RESOURCES)}


def _function_of(section: str) -> str:
    """The function a resource section belongs to."""
    prefix = next(p for p in _RESOURCES if section.startswith(p))
    return section[len(prefix):]


def compare(ref: dict[str, bytes], tree: dict[str, bytes]) -> list[str]:
    """Lines naming each entry (function or section) whose bytes differ, or
    that one side lacks."""
    lines = []
    for name in sorted(set(ref) | set(tree)):
        if name not in tree:
            lines.append(f"missing  {name}  (only in the reference)")
        elif name not in ref:
            lines.append(f"new      {name}  ({len(tree[name])} bytes; not in the reference)")
        elif ref[name] != tree[name]:
            a, b = ref[name], tree[name]
            first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            lines.append(f"differs  {name}  ({len(a)} -> {len(b)} bytes, first at byte {first})")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ref", help="reference cubin")
    ap.add_argument("tree", help="cubin to check")
    ap.add_argument("--label", default="", help="name of this variant in the output")
    args = ap.parse_args(argv)
    ref, tree = text_sections(args.ref), text_sections(args.tree)
    lines = compare(ref, tree)
    # resources only matter where the code is the same (a code change
    # usually moves them too, and is already reported)
    changed = {k for k in set(ref) | set(tree) if ref.get(k) != tree.get(k)}
    res = [line for line in compare(resource_sections(args.ref), resource_sections(args.tree))
           if _function_of(line.split()[1]) not in changed]
    tag = f"[{args.label}] " if args.label else ""
    for line in lines + res:
        print(tag + line)
    same = sum(1 for k in ref if k in tree and ref[k] == tree[k])
    print(f"{tag}{same} of {len(ref)} reference functions' machine code identical"
          + (f"; {len(lines)} differ, missing or new" if lines else "")
          + (f"; {len(res)} resource sections differ" if res else ""))
    return 1 if lines or res else 0


if __name__ == "__main__":
    sys.exit(main())
