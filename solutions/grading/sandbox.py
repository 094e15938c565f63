"""Where a submission's code runs: a sandbox per submission, with real OS boundaries.

- **bwrap**: bubblewrap's PID, network, IPC and UTS namespaces; the Python runtime, the data files
  and the workspace read-only, a results folder and a private /tmp, nothing else.
- **docker**: the same in a container of the image built from solutions/grading/Dockerfile.
- **setpriv**: as root where namespaces are forbidden (Gradescope's container): an unprivileged
  uid per submission, rlimits, a seccomp filter that leaves unix sockets only (seccomp.py), and
  every process and System V IPC object of that uid removed afterwards. It is refused where that
  uid could read the reference or write the course or the Python it runs (`setpriv_exposure`).
- **none**: only when asked for (`--no-sandbox`); every report then says UNSANDBOXED.

What each guarantees, side by side: docs/grading.md, "What each sandbox guarantees".
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from minilm.course import tasks
from solutions.grading import seccomp

WS, OUT, DATA = "/ws", "/out", "/data"  # where the workspace, the results and read-only data appear inside
UID_BASE = 61000  # the sandbox's uids (as root): one per submission, none of them a real account
# setpriv: no PID namespace sets a grader's uids apart from another grader's, so each grader
# process takes a block of its own (from its pid), one uid per submission, none a real account.
SETPRIV_UID_BASE, SETPRIV_BLOCK = 1_000_000, 10_000
IMAGE = "minilm-grader"
DOCKER_VENV = "/opt/venv"  # the image's Python environment (see the Dockerfile)
DOCKERFILE = Path(__file__).with_name("Dockerfile")
TRUSTED_PACKAGES = ("solutions",)  # the reference, hidden inputs and mistakes: never visible inside


class SandboxUnavailable(Exception):
    pass


@functools.lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    path = shutil.which("bwrap")
    if not path or not sys.platform.startswith("linux"):
        return None
    try:  # present but unusable (no namespaces allowed here) is the same as absent
        ok = subprocess.run([path, "--unshare-pid", "--unshare-net", "--dev-bind", "/", "/", "true"],
                            capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return path if ok else None


def _drop(uid: int) -> list[str]:
    """setpriv's arguments: to `uid` (and its own gid), no groups, no capabilities, no_new_privs."""
    return [f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--bounding-set=-all",
            "--inh-caps=-all", "--"]


@functools.lru_cache(maxsize=1)
def setpriv_path() -> str | None:
    """setpriv, where this process (root, on Linux) can drop to an unprivileged uid with it."""
    path = shutil.which("setpriv")
    if not path or not sys.platform.startswith("linux") or os.geteuid() != 0:
        return None
    try:
        ok = subprocess.run([path, *_drop(setpriv_uid(0)), "/bin/sh", "-c", "test \"$(id -u)\" != 0"],
                            capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return path if ok else None


def setpriv_uid(slot: int) -> int:
    return SETPRIV_UID_BASE + (os.getpid() % 400_000) * SETPRIV_BLOCK + slot % SETPRIV_BLOCK


def _editable_paths(name: str) -> list[str]:
    """Where an editable install's finder (setuptools' MAPPING) would import `name` from."""
    found = []
    for module in list(sys.modules.values()):
        mapping = getattr(module, "MAPPING", None)
        if isinstance(mapping, dict) and isinstance(mapping.get(name), str):
            found.append(mapping[name])
    return found


def setpriv_exposure(trusted: list[str] | None = None, guarded: list[str] | None = None) -> list[str]:
    """What an unprivileged uid could reach that it must not, probed as such a uid (the kernel's
    own answer): any file of `trusted` it could read (default: the solutions package the grader
    runs, and any other copy on its import paths: the reference, the hidden inputs, the grader),
    and any folder of `guarded` it could write (default: the course and the Python it runs)."""
    if trusted is None:
        trusted = [str(Path(__file__).resolve().parents[1]), *trusted_paths(), *_editable_paths("solutions")]
    if guarded is None:
        guarded = [str(tasks.ROOT), str(tasks.PACKAGE_DIR), *_runtime_paths(), os.path.dirname(python())]
    readable = []
    for folder in sorted(set(trusted)):
        readable.append(folder)
        for base, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            readable += [os.path.join(base, f) for f in files]
    script = ('for p in "$@"; do case "$p" in r:*) [ -r "${p#r:}" ] && echo "$p";; w:*) [ -w "${p#w:}" ] && echo '
              '"$p";; '
              'esac; done; true')
    try:
        r = subprocess.run([setpriv_path() or "setpriv", *_drop(setpriv_uid(0)), "/bin/sh", "-c", script, "sh",
                            *[f"r:{p}" for p in readable], *[f"w:{p}" for p in sorted(set(guarded))]],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return [f"(the probe as an unprivileged uid failed: {type(e).__name__})"]
    if r.returncode != 0:
        return [f"(the probe as an unprivileged uid failed: {r.stderr.strip()[:200]})"]
    return [("readable: " if line.startswith("r:") else "writable: ") + line[2:] for line in r.stdout.splitlines()]


def docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def choose(kind: str) -> str:
    """The sandbox to use: "auto" picks bwrap, then docker, then (as root) setpriv; "none" must be
    asked for."""
    if kind == "auto":
        if bwrap_path():
            return "bwrap"
        if docker_available():
            return "docker"
        if setpriv_path():
            _check_setpriv("bwrap cannot create namespaces here and no Docker daemon answers, so the grader "
                           "would drop each submission to an unprivileged uid (setpriv), but")
            return "setpriv"
        raise SandboxUnavailable(
            "no sandbox is available: install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) or run a "
            "Docker daemon, or pass --no-sandbox to grade without one (every report then says UNSANDBOXED)")
    if kind == "setpriv":
        if not setpriv_path():
            raise SandboxUnavailable("--sandbox setpriv: it needs Linux, root and setpriv (util-linux), and a uid "
                                     "it can drop to")
        _check_setpriv("--sandbox setpriv:")
    if kind == "bwrap" and not bwrap_path():
        raise SandboxUnavailable("--sandbox bwrap: bwrap is missing or cannot create namespaces here")
    if kind == "docker" and not docker_available():
        raise SandboxUnavailable("--sandbox docker: no Docker daemon answers (`docker info` failed)")
    return kind


def container_name(slot: int) -> str:
    """A name per docker run, so that the grader can kill the container, not only its client."""
    return f"minilm-grade-{os.getpid()}-{slot}-{secrets.token_hex(4)}"


def _check_setpriv(why: str) -> None:
    if not seccomp.available():
        raise SandboxUnavailable(f"{why} it cannot load the seccomp filter that cuts the network off: it needs "
                                 "libseccomp.so.2 (Debian/Ubuntu: libseccomp2) and pyseccomp (pip install -e '.[dev]')")
    exposed = setpriv_exposure()
    if exposed:
        raise SandboxUnavailable(
            f"{why} an unprivileged uid could reach what it must not ({'; '.join(exposed[:3])}"
            f"{f'; {len(exposed) - 3} more' if len(exposed) > 3 else ''}): make the course readable by root only "
            f"(chmod 700 {tasks.ROOT}) and the Python it runs writable by root only, or pass --no-sandbox to "
            "grade without a sandbox (every report then says UNSANDBOXED)")


def python() -> str:
    """The interpreter the grader runs, as it was started: a venv's own `bin/python`, never the
    base interpreter it links to, which would not see the venv's packages (no pyvenv.cfg beside it)."""
    return os.path.abspath(sys.executable)


def _runtime_paths() -> list[str]:
    """The Python installation the grader runs in, read-only inside: a venv (its folder, with
    pyvenv.cfg and site-packages, at the path it was started from and at its real path), the base
    installation it was made from, and every other folder on the grader's sys.path (a conda env,
    pyenv, the system Python, a .pth's extra site folder). The course's own folder is never one of
    them: the sandbox sees only the workspace's copy of it."""
    course = os.path.realpath(tasks.ROOT)
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, sysconfig.get_paths()["purelib"],
             sysconfig.get_paths()["platlib"], os.path.dirname(python()), *sys.path}
    found = {os.path.abspath(p) for p in paths if p and os.path.isabs(p) and os.path.isdir(p)}
    found |= {os.path.realpath(p) for p in found}
    scratch = os.path.realpath(tempfile.gettempdir())  # where every submission's workspace is made
    return sorted(p for p in found if not _course_files(p, course) and not _within(scratch, p))


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _course_files(path: str, course: str) -> bool:
    """Whether binding `path` would show the course's own files (a venv inside it, .venv, is fine)."""
    if path == course or course.startswith(path.rstrip("/") + "/"):
        return True
    if not path.startswith(course + "/"):
        return False
    return not os.path.relpath(path, course).split(os.sep)[0].startswith((".", "venv", "env"))


def trusted_paths() -> list[str]:
    """Packages of the instructor's that a non-editable install puts beside the course in a
    site folder: hidden (an empty folder over each) inside the sandbox."""
    return sorted({os.path.join(p, name) for p in _runtime_paths() for name in TRUSTED_PACKAGES
                   if os.path.isdir(os.path.join(p, name))})


def _parents(path: str) -> list[str]:
    parts = Path(path).parts
    return [str(Path(*parts[:i])) for i in range(2, len(parts))]


@dataclass
class Sandbox:
    kind: str  # bwrap | docker | setpriv | none
    data: dict[str, str] = field(default_factory=dict)  # env var → host file or folder, bound read-only under /data
    memory_mb: int = 4096
    tmp_mb: int = 512  # the size of /tmp inside (bwrap), where the notebooks' temporary files go
    cpus: float = 1.0  # CPU time per submission, in cores (a cgroup's quota under bwrap, --cpus with docker)
    python: str = field(default_factory=python)  # the interpreter run inside (bwrap, setpriv, none)

    @property
    def unsandboxed(self) -> bool:
        return self.kind == "none"

    @property
    def same_paths(self) -> bool:
        """Whether the code inside sees the workspace and results at their own paths (no mounts)."""
        return self.kind in ("none", "setpriv")

    def env(self, extra: dict[str, str], ws: Path, out: Path) -> dict[str, str]:
        """The whole environment inside: nothing of the grader's own is passed on."""
        inside_ws, inside_out = (str(ws), str(out)) if self.kind in ("none", "setpriv") else (WS, OUT)
        home = f"{inside_ws}/.home" if self.kind == "none" else "/tmp/home"
        if self.kind == "setpriv":  # no private /tmp: a home of its own, made afresh for every process
            home = str(_home(ws))
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "PYTHONPATH": inside_ws,
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "MPLBACKEND": "Agg",
               "MPLCONFIGDIR": f"{home}/mpl", "JUPYTER_RUNTIME_DIR": f"{home}/jupyter",
               "JUPYTER_PLATFORM_DIRS": "1", "IPYTHONDIR": f"{home}/ipython", "MINILM_DATA_DIR": f"{home}/minilm-data",
               "MINILM_RESULTS": inside_out, "COLUMNS": "200"}
        if self.kind == "setpriv":
            env["TMPDIR"] = f"{home}/tmp"
        for var, host in self.data.items():
            env[var] = (host if self.kind == "none" else os.path.realpath(host) if self.kind == "setpriv"
                        else f"{DATA}/{var}")
        return env | extra

    def command(self, argv: list[str], ws: Path, out: Path, env: dict[str, str], slot: int) -> list[str]:
        """The command that runs `argv` (a python command line) on workspace `ws` and results `out`."""
        if self.kind == "none":
            return [self.python, *argv]
        if self.kind == "setpriv":
            return [setpriv_path(), *_drop(setpriv_uid(slot)), self.python, *argv]
        if self.kind == "docker":
            # As root, the submission's own uid (prepare chowns its folders to it); else the grader's own.
            user = f"{UID_BASE + slot}:{UID_BASE + slot}" if os.geteuid() == 0 else f"{os.getuid()}:{os.getgid()}"
            cmd = ["docker", "run", "--rm", "--name", container_name(slot), "--network", "none", "--read-only",
                   "--tmpfs", f"/tmp:size={self.tmp_mb}m,mode=1777", "--user", user, "--cap-drop", "ALL",
                   "--security-opt", "no-new-privileges", "--memory", f"{self.memory_mb}m",
                   "--memory-swap", f"{self.memory_mb}m", "--pids-limit", str(PIDS_MAX), "--cpus", f"{self.cpus:g}",
                   "-v", f"{ws}:{WS}:ro", "-v", f"{out}:{OUT}", "-w", WS]
            for var, host in self.data.items():
                cmd += ["-v", f"{os.path.realpath(host)}:{DATA}/{var}:ro"]
            # The image's venv first on PATH: the Python that has torch (a base image's own has not).
            env = {**env, "PATH": f"{DOCKER_VENV}/bin:{env.get('PATH', '/usr/bin:/bin')}"}
            for k, v in env.items():
                cmd += ["-e", f"{k}={v}"]
            # Per process, as _limit sets them outside (docker's --ulimit has no address space): an
            # allocation over the limit fails in Python rather than waking the container's OOM killer.
            return [*cmd, IMAGE, "prlimit", f"--as={self.memory_mb * 2**20}", f"--fsize={FSIZE_MAX}", "--",
                    f"{DOCKER_VENV}/bin/python", *argv]
        cmd = [bwrap_path(), "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
               "--die-with-parent", "--new-session", "--clearenv"]
        if os.geteuid() != 0:
            cmd.insert(1, "--unshare-user")
        for p in ("/usr", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
                  "/etc/localtime", "/etc/fonts", "/etc/ssl/certs"):
            if os.path.exists(p):
                cmd += ["--ro-bind", p, p]
        for link in ("bin", "lib", "lib64", "sbin"):
            target = Path("/") / link
            if target.is_symlink():
                cmd += ["--symlink", os.readlink(target), f"/{link}"]
            elif target.is_dir():
                cmd += ["--ro-bind", str(target), f"/{link}"]
        # /tmp first: a venv under /tmp is bound over the private tmpfs, not hidden by it.
        cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(self.tmp_mb * 2**20), "--tmpfs",
                "/tmp",
                "--perms", "0755", "--dir", DATA]
        made = set()
        for path in _runtime_paths():
            if path == "/usr" or path.startswith("/usr/"):
                continue
            for parent in _parents(path):
                if parent not in made and not any(parent == p or parent.startswith(p + "/") for p in _runtime_paths()):
                    made.add(parent)
                    cmd += ["--perms", "0755", "--dir", parent]
            cmd += ["--ro-bind", path, path]
        for path in trusted_paths():
            cmd += ["--tmpfs", path]
        # The workspace (the course's files and the submission's modules) is read-only: nothing one
        # sandboxed process writes there reaches the next one (the worker's children, then nbval).
        cmd += ["--ro-bind", str(ws), WS, "--bind", str(out), OUT, "--chdir", WS]
        for var, host in self.data.items():
            cmd += ["--ro-bind", os.path.realpath(host), f"{DATA}/{var}"]
        for k, v in env.items():
            cmd += ["--setenv", k, v]
        cmd.append("--")
        if os.geteuid() == 0:
            uid = str(UID_BASE + slot)
            cmd += ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                    "--bounding-set=-all", "--inh-caps=-all", "--"]
        return [*cmd, self.python, *argv]

    def prepare(self, ws: Path, out: Path, slot: int) -> None:
        """Hand the fresh workspace and the empty results folder to the sandbox's uid."""
        if self.kind == "setpriv":
            _prepare_setpriv(ws, out, setpriv_uid(slot))
            return
        if self.kind == "none" or os.geteuid() != 0:
            return
        uid = UID_BASE + slot
        for root in (ws, out):
            os.chown(root, uid, uid)
            for p in root.rglob("*"):
                os.lchown(p, uid, uid)


def _home(ws: Path) -> Path:
    return ws.parent / "home"


def _prepare_setpriv(ws: Path, out: Path, uid: int) -> None:
    """The submission's folder (ws's parent) reachable by its uid alone, and listed by nobody; the
    workspace root's and read-only; the results folder root's until its run hands it over."""
    os.chown(ws.parent, 0, uid)
    os.chmod(ws.parent, 0o710)  # its uid's group may pass through it, to ws, out and home; nobody else
    for base, dirs, files in os.walk(ws):
        os.chown(base, 0, 0)
        os.chmod(base, 0o755)
        for name in dirs + files:
            path = os.path.join(base, name)
            os.lchown(path, 0, 0)
            if not os.path.islink(path) and name in files:
                os.chmod(path, (os.stat(path).st_mode & 0o777 | 0o444) & ~0o022)
    _reclaim(out)


def _reclaim(folder: Path) -> None:
    """Everything in `folder` root's again, nothing of it writable by the sandbox's uid."""
    os.chown(folder, 0, 0)
    os.chmod(folder, 0o700)
    for base, dirs, files in os.walk(folder):
        for name in dirs + files:
            os.lchown(os.path.join(base, name), 0, 0)


def _hand_over(out: Path, ws: Path, uid: int) -> None:
    """Before a setpriv run: the results folder its uid's, and a fresh home with a private TMPDIR."""
    os.chown(out, uid, uid)
    os.chmod(out, 0o700)
    home = _home(ws)
    shutil.rmtree(home, ignore_errors=True)
    (home / "tmp").mkdir(parents=True)
    for p in (home, home / "tmp"):
        os.chown(p, uid, uid)
        os.chmod(p, 0o700)


WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm")


def _end_uid(uid: int) -> None:
    """After a setpriv run: kill every process of its uid, daemons that left the session included
    (kill(-1) as that uid reaches exactly them), and remove what it left in the world-writable folders."""
    if uid < SETPRIV_UID_BASE or not setpriv_path():  # never kill(-1) as anyone else: as root it kills everything
        return
    # First as root, which no process of the uid can stop or reach into: a shell of its uid, run
    # while one of its daemons lived, could be stopped (SIGSTOP) and so the daemon outlive the run.
    _kill_uid_as_root(uid)
    for _ in range(3):  # then kill(-1) as the uid, which no fork escapes: under the same seccomp filter
        try:
            r = subprocess.run([setpriv_path(), *_drop(uid), "/bin/sh", "-c",
                                f'test "$(id -u)" = {uid} && kill -KILL -1'],
                               capture_output=True, timeout=30, preexec_fn=seccomp.NoNetwork().install)
        except (OSError, subprocess.SubprocessError):
            break
        if r.returncode != 0:  # nothing left to kill
            break
    _kill_uid_as_root(uid)
    _remove_ipc(uid)
    for folder in WORLD_WRITABLE:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def _kill_uid_as_root(uid: int, rounds: int = 50) -> None:
    """SIGKILL every live process whose real, effective, saved or file uid is `uid` (its
    /proc/<pid>/status says: a non-dumpable process's folder is root's), until a pass finds none."""
    for _ in range(rounds):
        found = False
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                status = (p / "status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if str(uid) not in fields.get("Uid", "").split() or fields.get("State", "").strip().startswith(("Z", "X")):
                continue
            found = True
            try:
                os.kill(int(p.name), signal.SIGKILL)
            except OSError:
                pass
        if not found:
            return
        time.sleep(0.01)


IPC_KINDS = {"shm": "-m", "sem": "-s", "msg": "-q"}  # /proc/sysvipc/<kind> → ipcrm's option


def _remove_ipc(uid: int) -> None:
    """Remove the System V shared memory segments, semaphores and message queues `uid` created or
    owns: they outlive every process (a segment keeps its memory until removed), and nothing of a
    run may. Matched on the creator's uid too, which IPC_SET cannot change (the owner it can)."""
    for kind, flag in IPC_KINDS.items():
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        head = lines[0].split()
        ids = []
        for line in lines[1:]:
            row = dict(zip(head, line.split()))
            if str(uid) in (row.get("uid"), row.get("cuid")):
                ids += [flag, row[head[1]]]  # shmid, semid or msqid
        if ids:
            try:
                subprocess.run(["ipcrm", *ids], capture_output=True, timeout=30)
            except (OSError, subprocess.SubprocessError):
                pass


CGROUP_ROOT = Path("/sys/fs/cgroup")
PIDS_MAX = 512
FSIZE_MAX = 128 * 2**20  # the largest file one sandboxed process may write (WRITE_MAX_BYTES caps all)


class Limits:
    """A cgroup per sandboxed run (v1 or v2, written directly): memory, pids and CPU for everything
    the submission starts. Where the machine has none, or it may not be written, `missing` says
    which limits a report must state were not applied (RLIMIT_AS still bounds each process)."""

    def __init__(self, name: str, memory_mb: int, cpus: float):
        self.dirs: list[Path] = []
        self.missing: list[str] = []
        v2 = (CGROUP_ROOT / "cgroup.controllers").is_file()
        wanted = {"memory": ("memory.max" if v2 else "memory.limit_in_bytes", str(memory_mb * 2**20)),
                  "pids": ("pids.max", str(PIDS_MAX)),
                  "cpu": ("cpu.max", f"{int(cpus * 100000)} 100000") if v2
                  else ("cpu.cfs_quota_us", str(int(cpus * 100000)))}
        for controller, (knob, value) in wanted.items():
            folder = CGROUP_ROOT / name if v2 else CGROUP_ROOT / controller / name
            try:
                folder.mkdir(exist_ok=True)
                (folder / knob).write_text(value)
                if folder not in self.dirs:
                    self.dirs.append(folder)
            except OSError:
                self.missing.append(controller)

    def enter(self) -> None:
        for folder in self.dirs:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        for folder in self.dirs:
            for _ in range(50):  # a group empties a moment after its last process is killed
                try:
                    folder.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def _limit(memory_mb: int, limits: Limits | None, nproc: int | None = None, cpu_seconds: int | None = None,
           network: seccomp.NoNetwork | None = None):
    def limit():
        os.setsid()
        if limits is not None:
            try:
                limits.enter()
            except OSError:
                pass
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
            resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_MAX, FSIZE_MAX))
            if nproc is not None:  # counted per uid: the sandbox's uid is this submission's alone
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
                # POSIX message queues outlive their processes (no IPC namespace here): none at all.
                resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
            if cpu_seconds is not None:
                resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
        except (ImportError, ValueError, OSError):
            pass
        if network is not None:  # last, and never skipped: a failure stops the run before setpriv runs
            network.install()
    return limit


@dataclass
class Run:
    returncode: int | None  # None: killed at its time limit, or when it wrote more than WRITE_MAX_BYTES
    seconds: float
    unlimited: list[str] = field(default_factory=list)  # cgroup limits this machine could not apply
    wrote_too_much: bool = False


# What one sandboxed run may leave in the folders it writes on the grader's disk (its results folder, its log and,
# under setpriv, its home), in all: the worker's results are a few MB. Past either, the run is stopped.
WRITE_MAX_BYTES, WRITE_MAX_FILES = 256 * 2**20, 2_000
WATCH_SECONDS = 0.2  # how often the run's folders are measured


def written(paths: list[Path], max_files: int = WRITE_MAX_FILES) -> tuple[int, int]:
    """(bytes on disk, files) under `paths`, counting at most max_files + 1 files."""
    total, files, todo = 0, 0, [p for p in paths if p.exists()]
    while todo and files <= max_files:
        path = todo.pop()
        try:
            if path.is_dir() and not path.is_symlink():
                with os.scandir(path) as entries:
                    todo.extend(Path(e.path) for e in entries)
            else:
                files += 1
                total += path.lstat().st_blocks * 512
        except OSError:
            continue
    return total, files


def run(box: Sandbox, argv: list[str], ws: Path, out: Path, env: dict[str, str], slot: int, timeout: float,
        log: Path) -> Run:
    """Run one sandboxed command to completion or its time limit, then kill all it started."""
    cmd = box.command(argv, ws, out, env, slot)
    limits = (Limits(f"minilm-grade-{os.getpid()}-{slot}", box.memory_mb, box.cpus) if box.kind in ("bwrap", "setpriv")
              else None)
    setpriv = box.kind == "setpriv"
    if setpriv:
        _hand_over(out, ws, setpriv_uid(slot))
    t0 = time.monotonic()
    with open(log, "wb") as handle:
        kw = dict(env=env, cwd=ws) if box.kind in ("none",
                                                   "setpriv") else dict(env={"PATH": os.environ.get("PATH",
                                                                                                    "/usr/bin:/bin")})
        rlimits = dict(nproc=PIDS_MAX, cpu_seconds=int(timeout * max(1.0, box.cpus)) + 10) if setpriv else {}
        network = seccomp.NoNetwork() if setpriv else None
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
                                preexec_fn=(_limit(box.memory_mb, limits, **rlimits, network=network)
                                            if os.name == "posix" else None),
                                **kw)
        rc, too_much = None, False
        watched = [out, log] + ([_home(ws)] if setpriv else [])
        deadline = time.monotonic() + timeout
        try:
            while rc is None and time.monotonic() < deadline:
                try:
                    rc = proc.wait(timeout=min(WATCH_SECONDS, max(0.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    size, files = written(watched)
                    if size > WRITE_MAX_BYTES or files > WRITE_MAX_FILES:
                        too_much = True
                        break
        finally:
            try:  # the whole session: with bwrap, its PID namespace goes with it
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.kill()
            proc.wait()
            # Killing `docker run` (at the time limit, or if it died) leaves its container running:
            # remove that too. A client that exited by itself saw its container's init, and so all
            # of the container, exit.
            if box.kind == "docker" and (rc is None or rc < 0 or too_much):
                try:
                    subprocess.run(["docker", "rm", "-f", cmd[cmd.index("--name") + 1]], stdin=subprocess.DEVNULL,
                                   capture_output=True, timeout=60)
                except (OSError, subprocess.SubprocessError):
                    pass
    if box.kind == "none":
        _kill_strays(ws)
    if setpriv:  # every process of its uid dead; then its results folder root's again, its home gone
        _end_uid(setpriv_uid(slot))
        _reclaim(out)
        shutil.rmtree(_home(ws), ignore_errors=True)
    if limits is not None:
        limits.remove()
    if too_much:  # what it left counts for nothing, and takes no more of the grader's disk
        for path in out.iterdir() if out.is_dir() else ():
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() and not path.is_symlink() else path.unlink()
        log.write_bytes(b"")
    return Run(None if too_much else rc, time.monotonic() - t0, limits.missing if limits is not None else [], too_much)


def _kill_strays(ws: Path) -> None:
    """Without a sandbox: kill what still runs in the workspace (best effort; a process that
    moved elsewhere escapes, which is why grading without a sandbox is marked UNSANDBOXED)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    for p in proc.iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                if os.readlink(p / "cwd").startswith(str(ws)):
                    os.kill(int(p.name), signal.SIGKILL)
            except OSError:
                pass
