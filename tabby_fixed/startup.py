"""Process-wide settings applied once at start-up, before the server (and torch) is imported.

``memory.cuda_malloc_async`` only works if PyTorch reads it before its first import, so this runs
between reading the config and importing anything that imports torch.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping

from .config import TabbyConfig
from .unsupported import warn_unsupported

log = logging.getLogger(__name__)

ALLOCATOR_VARIABLES = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
ASYNC_ALLOCATOR = "backend:cudaMallocAsync"


def set_allocator(config: TabbyConfig, environ: MutableMapping[str, str] = os.environ) -> None:
    """Ask PyTorch for CUDA's asynchronous allocator (both of its variable names, as upstream sets).

    Off means the allocator the environment already names, untouched. Torch imported earlier has
    already read the variables, which the log then says instead of claiming an effect.
    """
    if not config.memory.cuda_malloc_async:
        return
    before = environ.get(ALLOCATOR_VARIABLES[0], environ.get(ALLOCATOR_VARIABLES[1]))
    for name in ALLOCATOR_VARIABLES:
        environ[name] = ASYNC_ALLOCATOR
    if "torch" in sys.modules and before != ASYNC_ALLOCATOR:
        log.warning("memory.cuda_malloc_async: torch was imported before the config was read; it keeps "
                    "the allocator %s", before or "of its own default")
    else:
        log.info("CUDA allocator: cudaMallocAsync (memory.cuda_malloc_async)")


def raise_priority(config: TabbyConfig) -> None:
    """``developer.realtime_process_priority``: the highest scheduling priority the process may take.

    Upstream asks for realtime and settles for high without privileges; here the niceness goes to
    -20, or as low as permitted, and the log says which.
    """
    if not config.developer.realtime_process_priority:
        return
    for niceness in (-20, -10, -5):
        try:
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
        except OSError:  # PermissionError without CAP_SYS_NICE
            continue
        log.info("developer.realtime_process_priority: niceness set to %d", niceness)
        return
    log.warning("developer.realtime_process_priority: not permitted to raise the priority (run as root or "
                "grant CAP_SYS_NICE); it stays at niceness %d", os.getpriority(os.PRIO_PROCESS, 0))


def prepare_process(config: TabbyConfig) -> None:
    """Everything the config asks of the process before the server starts, and what it cannot do."""
    set_allocator(config)
    raise_priority(config)
    warn_unsupported(config)
