"""Landlock (Linux 5.13+): the setpriv sandbox's file boundary, refusing by default.

Without namespaces, a setpriv'd uid sees the machine's files with an ordinary user's rights:
any world-readable copy of the reference, a classmate's upload, the instructor's home. Landlock
is an LSM any process may apply to itself, with no namespace and no capability (Docker's
default seccomp profile allows its three system calls since Docker 23): after
`restrict_self()`, this process and everything it starts may open only what the rules list,
whatever its uid and whatever the files' modes. Where the kernel supports it, a scope also
closes abstract unix sockets made outside the sandbox and signals to processes outside it.

A ruleset is built in the grader (`Ruleset(...)`, before the fork) and applied in the child
right before it execs setpriv (`Ruleset.restrict`, one system call): root then, so no
no_new_privs is needed, and the restriction survives exec and the change of uid.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform

# x86_64 and aarch64 share these numbers (the generic syscall table); other machines: unsupported.
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2  # ABI 6

FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file may carry
READ = EXECUTE | READ_FILE | READ_DIR
DEVICES = READ_FILE | WRITE_FILE | READ_DIR | IOCTL_DEV  # /dev/null, /dev/urandom, a terminal's ioctls


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE … MAKE_SYM
    for since, right in ((2, REFER), (3, TRUNCATE), (5, IOCTL_DEV)):
        if abi >= since:
            rights |= right
    return rights


class _Attr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.lru_cache(maxsize=1)
def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


@functools.lru_cache(maxsize=1)
def abi() -> int:
    """The kernel's Landlock ABI version: 0 where there is none (an old kernel, Landlock not
    among the LSMs it started, a seccomp profile that refuses its calls, not Linux)."""
    if not platform.system() == "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    try:
        version = _libc().syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                                  ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


class Ruleset:
    """Read (and execute) beneath `read`, read and write beneath `write`, devices beneath `devices`;
    nothing else. Paths that do not exist are skipped."""

    def __init__(self, read: list[str], write: list[str], devices: list[str] = ()):
        self.abi = abi()
        if self.abi < 1:
            raise OSError("Landlock is not available here")
        fs = _fs_rights(self.abi)
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if self.abi >= 6 else 0
        attr = _Attr(fs, 0, scoped)
        size = 24 if self.abi >= 6 else 8  # handled_access_net (ABI 4) left out: TCP stays as it is
        fd = _libc().syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
        self.fd = int(fd)
        self.scoped = bool(scoped)
        self._prctl, self._syscall = _libc().prctl, _libc().syscall  # resolved here, not in the forked child
        for paths, rights in ((read, READ), (devices, DEVICES), (write, fs)):
            for path in paths:
                self._allow(path, rights & fs)

    def _allow(self, path: str, rights: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                rights &= FILE_RIGHTS
            rule = _PathBeneath(rights, fd)
            if _libc().syscall(SYS_ADD_RULE, ctypes.c_int(self.fd), ctypes.c_int(RULE_PATH_BENEATH),
                               ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed on {path}")
        finally:
            os.close(fd)

    def restrict(self) -> None:
        """In the child, before exec: from here on, only the rules' paths. Async-signal-safe
        enough for a preexec_fn: one system call through a function resolved in the parent."""
        # no_new_privs: Landlock's condition without CAP_SYS_ADMIN (which Docker does not give root);
        # setpriv, run as root, then drops the uid with CAP_SETUID, which no_new_privs leaves alone.
        if self._prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if self._syscall(SYS_RESTRICT_SELF, ctypes.c_int(self.fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass
