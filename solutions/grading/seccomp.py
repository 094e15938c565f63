"""The setpriv sandbox's network filter, written with libseccomp (pyseccomp binds the system's
libseccomp.so.2): the code may create unix sockets only.

Without namespaces a setpriv'd uid shares the machine's network: it could send hidden inputs out,
or reach a service on localhost. So socket() and socketpair() of any family but AF_UNIX fail with
EOPNOTSUPP. That errno, not EPERM: libzmq takes EOPNOTSUPP from getifaddrs' netlink socket as "no
such interface" and aborts on any other, so ipykernel, failing to bind its TCP pipe for forked
children's output, warns and goes on (its kernels talk to nbval over unix sockets: nbval_plugin.py).
EPERM for what could get a socket some other way or leave the filter's reach: io_uring (sockets
without socket()), ptrace, process_vm_readv/writev and pidfd_getfd (a socket taken from a process
of the same uid outside the filter), and new namespaces (unshare, setns, clone's CLONE_NEW* flags;
clone3 keeps its flags where a filter cannot read them, so it says ENOSYS and glibc falls back to
clone). A system call of another ABI (i386's int 0x80, x32) is refused whole.

The filter is built in the grader, before the fork, and loaded in the child right before it execs
setpriv: loading sets no_new_privs; the filter survives exec and the change of uid and binds every
descendant. Docker's default seccomp profile lets any process load one.
"""

from __future__ import annotations

import errno
import platform
import socket

CLONE_NEW = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)  # NS…NET
REFUSED = ("io_uring_setup", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "unshare", "setns")


def _pyseccomp():
    import pyseccomp  # raises RuntimeError where libseccomp.so.2 is missing

    return pyseccomp


def available() -> bool:
    """Whether this machine can load the filter: Linux, with pyseccomp and libseccomp."""
    if platform.system() != "Linux":
        return False
    try:
        _pyseccomp()
    except (ImportError, OSError, RuntimeError):
        return False
    return True


class NoNetwork:
    """Built in the grader, before the fork; `install()` in the child right before it execs setpriv."""

    def __init__(self):
        if not available():
            raise OSError(f"no seccomp filter here (pyseccomp and libseccomp.so.2 on Linux): {platform.system()}")
        sc = _pyseccomp()
        f = sc.SyscallFilter(sc.ALLOW)
        f.set_attr(sc.Attr.ACT_BADARCH, sc.ERRNO(errno.EPERM))
        for call in ("socket", "socketpair"):
            f.add_rule(sc.ERRNO(errno.EOPNOTSUPP), call, sc.Arg(0, sc.NE, socket.AF_UNIX))
        flags = 1 if platform.machine().startswith("s390") else 0  # clone(2): s390 swaps its first two arguments
        for bit in CLONE_NEW:
            f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(flags, sc.MASKED_EQ, bit, bit))
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        for call in REFUSED:
            f.add_rule(sc.ERRNO(errno.EPERM), call)
        self._filter = f

    def install(self) -> None:
        self._filter.load()
