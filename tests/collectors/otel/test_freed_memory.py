"""The receiver's process reuses a request's freed buffers for the next request (glibc's malloc
tuned by ``serve``): buffers of the sizes an export request passes through cost no fresh pages once
as large a buffer has been freed, where glibc by default maps each anew (a third of the event loop's
CPU went to those page faults)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_SCRIPT = """
import resource

from tracejudge_collectors.otel._receiver import _reuse_freed_memory

_reuse_freed_memory()
MB = 1 << 20
first = bytearray(8 * MB)  # a large request's body, freed
del first
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for n in range(1, 7):  # bodies of other sizes after it (zero-filled: every page written)
    body = bytearray(n * MB + 12345)
    del body
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _page_faults() -> int:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(
    sys.platform != "linux" or not os.confstr("CS_GNU_LIBC_VERSION"), reason="tunes glibc's malloc only"
)
def test_freed_request_buffers_are_reused_without_page_faults() -> None:
    # 21 MB of buffers after an 8 MB one was freed: glibc's default maps most of them anew (1,531
    # page faults here); tuned, they come from the freed memory (0).
    assert _page_faults() < 64
