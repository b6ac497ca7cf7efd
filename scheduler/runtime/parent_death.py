"""Processes that die with their parent: the kernel's parent-death signal (Linux `prctl(PR_SET_PDEATHSIG)`).

Used by DAG file processors, executor workers and tries' children. Linux ties the signal to the *thread*
that forked the process: it fires when that thread ends. Elsewhere (no `prctl`) nothing is armed.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()  # looked up once, at import, before any fork: children only make the call


def die_with_parent(parent_pid: int, signum: int) -> bool:
    """Ask Linux to send `signum` to this process when the thread that created it dies. False when the
    parent (`parent_pid`, read before the fork) is already gone, so the signal will never come: the caller
    should exit."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
    return os.getppid() == parent_pid
