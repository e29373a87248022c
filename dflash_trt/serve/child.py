"""Server child processes (tritonserver, trtllm-serve) that die with `dflash-trt serve`.

A child started with `preexec_fn=die_with_parent()` gets SIGKILL from the kernel the moment the process that started
it exits, however it exits (Linux PR_SET_PDEATHSIG): a SIGKILLed `dflash-trt serve` leaves no server answering on its
ports. Elsewhere (no prctl) it is a no-op. Its own clean shutdown (SIGINT, then SIGTERM) stays `TritonServer.stop`'s.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent():
    """A preexec_fn for subprocess.Popen (None where prctl does not exist)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # resolved before the fork: nothing is loaded in the child
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec
