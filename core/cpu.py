"""What this CPU computes natively: its feature flags, as the kernel lists them (x86 ``flags``, aarch64
``Features``). Kernels are chosen by them: the int8 ONNX export's range, the LLM stand-in's dtype."""

from __future__ import annotations

import os
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """Every flag of every processor in ``cpuinfo``; empty where it cannot be read (not Linux)."""
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        return frozenset()
    return frozenset(flag for line in lines if line.startswith(("flags", "Features"))
                     for flag in line.split(":", 1)[1].split())


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's limit), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity call on this platform
        return max(1, os.cpu_count() or 1)
