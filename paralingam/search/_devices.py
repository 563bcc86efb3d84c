"""``devices=`` of ``fit`` checked without a GPU (shared by the backend choice and the CUDA search)."""


def check_devices(devices, backend="auto"):
    """``devices=`` of ``fit`` checked without a GPU: None, ``"all"`` or a tuple of ids.

    Raises
    ------
    ValueError
        Naming the problem: not ``None``, ``"all"`` or a non-empty sequence
        of distinct non-negative device ids, or devices with ``backend="cpu"``.
    """
    import numbers

    if devices is None:
        return None
    if backend == "cpu":
        raise ValueError(f"devices={devices!r} selects GPUs, but backend='cpu'; "
                         "use backend='cuda' (or 'auto'), or leave devices=None")
    if isinstance(devices, str):
        if devices == "all":
            return "all"
        raise ValueError(f"devices must be None, 'all' or a list of GPU ids; got {devices!r}")
    if isinstance(devices, numbers.Integral) and not isinstance(devices, bool):
        raise ValueError(f"devices must be None, 'all' or a list of GPU ids; got the number "
                         f"{devices!r} (write devices=[{devices!r}])")
    try:
        ids = list(devices)
    except TypeError:
        raise ValueError(f"devices must be None, 'all' or a list of GPU ids; got {devices!r}") from None
    if not ids:
        raise ValueError("devices must name at least one GPU; got an empty list")
    for d in ids:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 0:
            raise ValueError(f"devices must be non-negative integer GPU ids; got {d!r} in {devices!r}")
    ids = [int(d) for d in ids]
    dup = sorted({d for d in ids if ids.count(d) > 1})
    if dup:
        raise ValueError(f"devices lists GPU {dup[0]} more than once: {ids}")
    return tuple(ids)
