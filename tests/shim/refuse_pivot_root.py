#!/usr/bin/python3
"""refuse_pivot_root.py PROGRAM ARGS...: runs PROGRAM with a seccomp filter
(libseccomp, through ctypes) under which pivot_root(2) fails with EINVAL, as
the kernel answers on a node whose root is the initial ramfs (a diskless
node that never switched root). Every descendant inherits the filter. Used
by tests/shim/driver.py (mount_without_pivot_root)."""
import ctypes
import ctypes.util
import errno
import os
import sys

SCMP_ACT_ALLOW = 0x7FFF0000


def scmp_act_errno(e):
    return 0x00050000 | (e & 0xFFFF)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                     ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    nr = lib.seccomp_syscall_resolve_name(b"pivot_root")
    if not ctx or nr < 0:
        print("refuse_pivot_root: libseccomp cannot set the filter up", file=sys.stderr)
        return 2
    if lib.seccomp_rule_add(ctx, scmp_act_errno(errno.EINVAL), nr, 0) != 0 or \
            lib.seccomp_load(ctx) != 0:
        print("refuse_pivot_root: loading the filter failed", file=sys.stderr)
        return 2
    os.execvp(sys.argv[1], sys.argv[1:])
    return 127


if __name__ == "__main__":
    sys.exit(main())
