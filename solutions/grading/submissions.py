"""Reading submissions: a directory, a .zip or a git URL holding a `minilm` package.

Only the exercise modules (minilm/linear.py, rmsnorm.py, …) are read, as bytes, with size
limits, never following a symlink and never extracting an archive. Whatever is wrong with one
file (missing, too big, a symlink, not UTF-8, a syntax error) becomes a line of feedback and
that module's stub; the rest of the submission is graded.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import subprocess
import zipfile
from pathlib import Path

from minilm.course import tasks

MAX_MODULE_BYTES = 1_000_000  # an exercise module is a few kB; anything bigger is not code we run
MAX_ZIP_MEMBERS = 20_000


class GradeError(Exception):
    """A problem with the grader's inputs that stops the batch (not a student's code)."""


class SubmissionError(Exception):
    """A submission that cannot be graded at all: it gets 0 and this line, the batch goes on."""


@dataclasses.dataclass
class Submission:
    name: str
    source: str
    modules: dict[str, bytes]  # every exercise module: the student's, or the stub where theirs is unusable
    notes: list[str]  # trusted lines about what was wrong with the files
    broken: set[str] = dataclasses.field(default_factory=set)  # modules replaced by their stub


def course_stub(module: str) -> bytes:
    return (tasks.PACKAGE_DIR / f"{module}.py").read_bytes()


def _is_git_url(arg: str) -> bool:
    return "://" in arg or arg.startswith("git@")


def _git_protocol(url: str, allow_ssh: bool) -> str:
    """The one protocol a submission's repository may be fetched with: https, or ssh when asked for."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else "ssh"
    if scheme == "https" and re.fullmatch(r"https://[A-Za-z0-9.-]+(:\d+)?/[^\s]+", url):
        return "https"
    if scheme == "ssh" and allow_ssh and re.fullmatch(r"(ssh://[^\s/]+/|git@[A-Za-z0-9.-]+:)[^\s]+", url):
        return "ssh"
    raise SubmissionError(f"{url}: only https:// repository URLs are graded (ssh with --allow-ssh); "
                          "a local path or file:// URL is not a submission")


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:80] or "submission"


def _package_root(files: list[tuple[str, ...]], where: str) -> tuple[str, ...]:
    """The folder holding minilm/ among `files` (path parts): the top, or one folder down."""
    names = {f"{m}.py" for m in tasks.EXERCISE_MODULES}
    found = {parts[:-2] for parts in files if len(parts) in (2, 3) and parts[-2] == "minilm" and parts[-1] in names}
    if not found:
        expected = ", ".join(f"minilm/{m}.py" for m in tasks.EXERCISE_MODULES[:2])
        raise SubmissionError(f"no minilm package found in {where} (expected {expected} … at the top or one "
                              "folder down)")
    top = min(len(p) for p in found)
    roots = sorted(p for p in found if len(p) == top)
    if len(roots) > 1:
        raise SubmissionError(f"{where} holds several minilm packages "
                              f"({', '.join('/'.join(r + ('minilm',)) for r in roots)}): submit one")
    return roots[0]


def check_source(module: str, data: bytes) -> str | None:
    """Why this module cannot be Python source, as far as can be told without parsing it (the grader's lint
    parses it, in a process of its own with limits: a parse can take any time and memory), or None."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"minilm/{module}.py is not UTF-8 text (byte {e.start}): save it as UTF-8"
    if b"\0" in data:
        return f"minilm/{module}.py holds a null byte: save it as text"
    return None


def use_stub(sub: Submission, module: str, why: str) -> None:
    """Grade `module` as the course's stub, saying why."""
    sub.notes.append(why)
    sub.broken.add(module)
    sub.modules[module] = course_stub(module)


def _finish(name: str, source: str, found: dict[str, bytes | str]) -> Submission:
    """Stubs for what is missing or unusable, with one line each."""
    modules, notes, broken = {}, [], set()
    for m in tasks.EXERCISE_MODULES:
        data = found.get(m)
        if data is None:
            notes.append(f"minilm/{m}.py is missing: graded as the stub")
        elif isinstance(data, str):
            notes.append(data)
            data = None
        elif (why := check_source(m, data)) is not None:
            notes.append(why)
            broken.add(m)
        if data is None:
            broken.add(m)
            data = course_stub(m)
        modules[m] = data
    return Submission(name, source, modules, notes, broken)


def from_dir(root: Path, source: str) -> Submission:
    root = Path(root)
    candidates = [*root.glob("minilm/*.py"), *root.glob("*/minilm/*.py")]
    files = [p.relative_to(root).parts for p in candidates]
    pkg = _package_root(files, source)
    name = pkg[0] if pkg else root.resolve().name
    folder = root.joinpath(*pkg, "minilm")
    found: dict[str, bytes | str] = {}
    if any(p.is_symlink() for p in (folder, *[root.joinpath(*pkg[:i]) for i in range(1, len(pkg) + 1)])):
        raise SubmissionError(f"{source}: the minilm folder is a symlink: submit the files themselves")
    for m in tasks.EXERCISE_MODULES:
        path = folder / f"{m}.py"
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            found[m] = f"minilm/{m}.py is a symlink: not followed, graded as the stub"
        elif not stat.S_ISREG(st.st_mode):
            found[m] = f"minilm/{m}.py is not a regular file: graded as the stub"
        elif st.st_size > MAX_MODULE_BYTES:
            found[m] = (f"minilm/{m}.py is {st.st_size:,} bytes, over the {MAX_MODULE_BYTES:,}-byte limit: "
                        "graded as the stub")
        else:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as f:
                found[m] = f.read(MAX_MODULE_BYTES + 1)
    return _finish(name, source, found)


def from_zip(path: Path, source: str) -> Submission:
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            if len(infos) > MAX_ZIP_MEMBERS:
                raise SubmissionError(f"{path.name} holds {len(infos):,} files, over the {MAX_ZIP_MEMBERS:,} limit")
            members = {tuple(p for p in i.filename.replace("\\", "/").split("/") if p): i for i in infos
                       if not i.is_dir()}
            pkg = _package_root(list(members), path.name)
            found: dict[str, bytes | str] = {}
            for m in tasks.EXERCISE_MODULES:
                info = members.get((*pkg, "minilm", f"{m}.py"))
                if info is None:
                    continue
                if stat.S_ISLNK(info.external_attr >> 16):
                    found[m] = f"minilm/{m}.py is a symlink in the archive: graded as the stub"
                    continue
                if info.file_size > MAX_MODULE_BYTES:
                    found[m] = (f"minilm/{m}.py is {info.file_size:,} bytes, over the {MAX_MODULE_BYTES:,}-byte "
                                "limit: graded as the stub")
                    continue
                with z.open(info) as f:  # never trust the header's size: read at most the limit
                    data = f.read(MAX_MODULE_BYTES + 1)
                if len(data) > MAX_MODULE_BYTES:
                    found[m] = f"minilm/{m}.py unpacks to over {MAX_MODULE_BYTES:,} bytes: graded as the stub"
                else:
                    found[m] = data
    except SubmissionError:
        raise
    except Exception as e:  # noqa: BLE001 - an encrypted member raises RuntimeError; any archive is the student's
        raise SubmissionError(f"{path.name} is not a readable zip archive "
                              f"({type(e).__name__}: {str(e)[:100]})") from None
    return _finish(pkg[0] if pkg else path.stem, source, found)


def from_git(url: str, dest: Path, timeout: float = 300, allow_ssh: bool = False) -> Submission:
    """A shallow clone over one protocol, with no hooks, submodules or user configuration. What git
    prints comes from the server, so none of it reaches feedback: only the grader's own line does."""
    protocol = _git_protocol(url, allow_ssh)
    clone, home = dest / "clone", dest / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "GIT_TERMINAL_PROMPT": "0",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ALLOW_PROTOCOL": protocol,
           "GIT_SSH_COMMAND": "ssh -o BatchMode=yes"}
    cmd = ["git", "-c", "protocol.allow=never", "-c", f"protocol.{protocol}.allow=always", "-c",
           f"core.hooksPath={os.devnull}", "-c", "core.symlinks=false", "clone", "--depth", "1", "--quiet",
           "--no-recurse-submodules", "--no-tags", "--", url, str(clone)]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SubmissionError(f"git clone {url} did not finish in {timeout:.0f} s") from None
    if r.returncode != 0:
        raise SubmissionError(f"git clone {url} failed (git's exit status {r.returncode}): check the URL and "
                              "that the repository is readable without a password")
    return from_dir(clone, url)


def given_name(arg: str) -> str:
    """A submission's name: the one the instructor gave it (the folder's or the file's name, a
    repository's name), never one chosen inside it (a folder inside an archive is the student's)."""
    if _is_git_url(arg):
        return safe_name(re.sub(r"\.git$", "", arg.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]))
    path = Path(arg.rstrip("/\\") or arg)
    return safe_name(path.stem if path.suffix.lower() == ".zip" else path.name or str(path.resolve().name))


def resolve(arg: str, scratch: Path, allow_ssh: bool = False) -> Submission:
    """One submission's exercise modules, read into memory, under the name the instructor gave it."""
    sub = _resolve(arg, scratch, allow_ssh)
    sub.name = given_name(arg)
    return sub


def _resolve(arg: str, scratch: Path, allow_ssh: bool) -> Submission:
    if _is_git_url(arg):
        scratch.mkdir(parents=True, exist_ok=True)
        return from_git(arg, scratch, allow_ssh=allow_ssh)
    path = Path(arg)
    if path.is_dir():
        return from_dir(path, arg)
    if path.is_file() and (path.suffix.lower() == ".zip" or zipfile.is_zipfile(path)):
        return from_zip(path, arg)
    if path.exists():
        raise SubmissionError(f"{arg}: not a directory, a .zip or a git URL")
    raise SubmissionError(f"{arg}: no such file or directory")
