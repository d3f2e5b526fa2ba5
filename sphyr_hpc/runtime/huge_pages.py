"""Large anonymous mappings of this process backed by 2 MiB transparent huge pages (Linux).

numpy asks the kernel for huge pages on its large arrays (``madvise(MADV_HUGEPAGE)``);
memory from ``malloc`` (PETSc's vectors, KSP's and PCMG's work vectors) gets them only when
the machine's transparent huge pages are ``always`` or glibc is started with
``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``.  With 4 KiB pages a stencil sweep over a
dozen vectors of tens of MB misses the TLB on every page of every stream.

:func:`advise` marks every private anonymous mapping of at least ``min_bytes``
``MADV_HUGEPAGE`` (later faults in it take huge pages) and asks the kernel to collapse
what is already there (``MADV_COLLAPSE``, Linux 6.1+).  Both are hints: a kernel without
them, or with transparent huge pages ``never``, refuses them, and nothing changes.
"""

import ctypes
import ctypes.util
import sys

HUGE_PAGE = 2 << 20
MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25
MIN_BYTES = 8 << 20  # mappings below this are left as they are


def _anonymous_mappings(min_bytes):
    """(start, end) of this process's private, writable, anonymous mappings of at least ``min_bytes``."""
    out = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            address, perms = fields[0], fields[1]
            name = fields[5] if len(fields) > 5 else ""
            if perms[:2] != "rw" or perms[3] != "p" or name not in ("", "[heap]"):
                continue
            start, end = (int(part, 16) for part in address.split("-"))
            if end - start >= min_bytes:
                out.append((start, end))
    return out


def advise(min_bytes=MIN_BYTES):
    """Huge pages for the large anonymous mappings (see the module docstring); returns the bytes
    the kernel collapsed into huge pages (0 where it declines or the platform has none)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    try:
        mappings = _anonymous_mappings(min_bytes)
    except OSError:
        return 0
    collapsed = 0
    for start, end in mappings:
        first = -(-start // HUGE_PAGE) * HUGE_PAGE
        last = end // HUGE_PAGE * HUGE_PAGE
        if last - first < HUGE_PAGE:
            continue
        if libc.madvise(first, last - first, MADV_HUGEPAGE) != 0:
            continue
        if libc.madvise(first, last - first, MADV_COLLAPSE) == 0:
            collapsed += last - first
    return collapsed


__all__ = ["MIN_BYTES", "advise"]
