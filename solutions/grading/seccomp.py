"""A seccomp filter for the setpriv sandbox: no network, refusing by default.

Without namespaces a setpriv'd uid shares the machine's network: it could send hidden inputs
out, or reach a classmate's notebook kernel on localhost. This filter lets a process create unix
sockets only: socket() with any other family (TCP, UDP, raw, netlink …) fails with EPERM, and so
does io_uring_setup (io_uring can open sockets without calling socket()). System calls of another
ABI than the machine's own (i386's int 0x80, x32) are refused whole: the filter could not read
them. So are ptrace, process_vm_readv/writev and pidfd_getfd: with them (where Landlock, which
keeps ptrace inside its domain, is missing) a run could attach to another process of its uid that
the filter does not bind, make it call socket() and take the socket. Any process may install it
after no_new_privs, with no capability; Docker's default seccomp profile allows that. It survives
exec and the change of uid, and binds every descendant.

Notebook kernels then talk to nbval over unix sockets (minilm/course/sandboxed/nbval_plugin.py).
"""

from __future__ import annotations

import ctypes
import functools
import platform

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
LD_W_ABS, JEQ_K, JGE_K, RET_K = 0x20, 0x15, 0x35, 0x06  # classic BPF opcodes
ALLOW, REFUSE = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW; SECCOMP_RET_ERRNO with EPERM
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (little-endian: arg 0's low half)
AF_UNIX, X32_BIT = 1, 0x40000000
# The machine's audit arch, its numbers for socket and io_uring_setup, and for the calls that reach
# into another process of the same uid (ptrace, process_vm_readv/writev, pidfd_getfd).
ARCHES = {"x86_64": (0xC000003E, 41, 425, (101, 310, 311, 438)),
          "aarch64": (0xC00000B7, 198, 425, (117, 270, 271, 438))}


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Instruction))]


def available() -> bool:
    return platform.system() == "Linux" and platform.machine() in ARCHES


def _program(machine: str) -> list[tuple[int, str | int, str | int, int]]:
    """(opcode, jump if true, jump if false, operand); jumps name a label or are 0 (next)."""
    arch, socket, io_uring_setup, reaching = ARCHES[machine]
    return [
        (LD_W_ABS, 0, 0, ARCH), (JEQ_K, 0, "refuse", arch),
        (LD_W_ABS, 0, 0, NR), (JGE_K, "refuse", 0, X32_BIT),
        (JEQ_K, "family", 0, socket), (JEQ_K, "refuse", 0, io_uring_setup),
        *[(JEQ_K, "refuse", 0, nr) for nr in reaching[:-1]], (JEQ_K, "refuse", "allow", reaching[-1]),
        ("family", LD_W_ABS, 0, 0, ARG0), (JEQ_K, "allow", "refuse", AF_UNIX),
        ("allow", RET_K, 0, 0, ALLOW),
        ("refuse", RET_K, 0, 0, REFUSE),
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
