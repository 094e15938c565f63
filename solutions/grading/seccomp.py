"""A seccomp filter for the setpriv sandbox: no network, refusing by default.

Without namespaces a setpriv'd uid shares the machine's network: it could send hidden inputs
out, or reach a classmate's notebook kernel on localhost. This filter lets a process create unix
sockets only: socket() with any other family (TCP, UDP, raw, netlink …) fails with EPERM, and so
does io_uring_setup (io_uring can open sockets without calling socket()). System calls of another
ABI than the machine's own (i386's int 0x80, x32) are refused whole: the filter could not read
them. So are ptrace, process_vm_readv/writev and pidfd_getfd: with them (where Landlock, which
keeps ptrace inside its domain, is missing) a run could attach to another process of its uid that
the filter does not bind, make it call socket() and take the socket. socketpair() too makes unix
sockets only, and no namespace may be made (unshare, setns, clone's CLONE_NEW* flags; clone3 says
ENOSYS): a kernel's whole namespace code is attack surface, and Docker's default profile refuses
them as well. Any process may install it
after no_new_privs, with no capability; Docker's default seccomp profile allows that. It survives
exec and the change of uid, and binds every descendant.

Notebook kernels then talk to nbval over unix sockets (minilm/course/sandboxed/nbval_plugin.py).
"""

from __future__ import annotations

import ctypes
import functools
import platform

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06  # classic BPF opcodes
ALLOW, ERRNO = 0x7FFF0000, 0x00050000  # SECCOMP_RET_ALLOW; SECCOMP_RET_ERRNO, | the errno
EPERM, ENOSYS = 1, 38
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (little-endian: arg 0's low half)
AF_UNIX, X32_BIT = 1, 0x40000000
CLONE_NEW = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
# Each machine's audit arch and system call numbers.
ARCHES = {
    "x86_64": dict(arch=0xC000003E, socket=41, socketpair=53, clone=56, clone3=435,
                   refused=dict(io_uring_setup=425, ptrace=101, process_vm_readv=310, process_vm_writev=311,
                                pidfd_getfd=438, unshare=272, setns=308)),
    "aarch64": dict(arch=0xC00000B7, socket=198, socketpair=199, clone=220, clone3=435,
                    refused=dict(io_uring_setup=425, ptrace=117, process_vm_readv=270, process_vm_writev=271,
                                 pidfd_getfd=438, unshare=97, setns=268)),
}


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Instruction))]


def available() -> bool:
    return platform.system() == "Linux" and platform.machine() in ARCHES


def _program(machine: str) -> list[tuple]:
    """(opcode, jump if true, jump if false, operand), a label first where one is jumped to; a
    jump names its label, or is 0 (the next instruction)."""
    n = ARCHES[machine]
    refused = list(n["refused"].values())
    return [
        (LD_W_ABS, 0, 0, ARCH), (JEQ_K, 0, "refuse", n["arch"]),
        (LD_W_ABS, 0, 0, NR), (JGE_K, "refuse", 0, X32_BIT),
        (JEQ_K, "family", 0, n["socket"]), (JEQ_K, "family", 0, n["socketpair"]),
        (JEQ_K, "clone", 0, n["clone"]), (JEQ_K, "no such call", 0, n["clone3"]),
        *[(JEQ_K, "refuse", 0, nr) for nr in refused[:-1]], (JEQ_K, "refuse", "allow", refused[-1]),
        ("family", LD_W_ABS, 0, 0, ARG0), (JEQ_K, "allow", "refuse", AF_UNIX),
        # A new namespace through clone's flags; clone3 (flags in a struct the filter cannot read)
        # says ENOSYS, and glibc falls back to clone.
        ("clone", LD_W_ABS, 0, 0, ARG0), (JSET_K, "refuse", "allow", CLONE_NEW),
        ("no such call", RET_K, 0, 0, ERRNO | ENOSYS),
        ("allow", RET_K, 0, 0, ALLOW),
        ("refuse", RET_K, 0, 0, ERRNO | EPERM),
    ]


def _assemble(program: list[tuple]) -> list[tuple[int, int, int, int]]:
    labels = {step[0]: i for i, step in enumerate(program) if isinstance(step[0], str)}
    plain = [step[1:] if isinstance(step[0], str) else step for step in program]
    return [(code, labels[jt] - i - 1 if jt else 0, labels[jf] - i - 1 if jf else 0, k)
            for i, (code, jt, jf, k) in enumerate(plain)]


class NoNetwork:
    """Built in the grader, before the fork; `install()` in the child right before it execs setpriv."""

    def __init__(self):
        if not available():
            raise OSError(f"no seccomp filter for {platform.system()} {platform.machine()}")
        code = _assemble(_program(platform.machine()))
        self._instructions = (_Instruction * len(code))(*[_Instruction(*step) for step in code])
        self._program = _Program(len(code), self._instructions)
        self._prctl = _libc().prctl  # resolved here, not in the forked child

    def install(self) -> None:
        if self._prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if self._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self._program), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


@functools.lru_cache(maxsize=1)
def _libc():
    return ctypes.CDLL(None, use_errno=True)
