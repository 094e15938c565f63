"""The `minilm` command: every command the README and docs/*.md show is one of its subcommands and is
exercised here, either run for real (status, check, test) or dispatched to the module whose own
tests run it (train: tests/test_train.py, grade: test_grade.py, release: test_release.py, …)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys

import pytest
import tomllib

from minilm.course import cli, tasks

ROOT = tasks.ROOT


def minilm(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`minilm ARGS` as a student types it (through python -m, which is the same program and needs
    no console script on PATH), against the reference."""
    env = {**os.environ, "MINILM_IMPL": "solutions", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "minilm", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def bash_blocks(path) -> list[str]:
    """Every ```bash block of one Markdown file."""
    return re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def readme_commands(paths=None) -> list[list[str]]:
    """Every `minilm …` line of the bash blocks of the README and docs/*.md (or of `paths`), as argv
    (comments and env prefixes dropped)."""
    out = []
    for path in DOCS if paths is None else paths:
        for block in bash_blocks(path):
            for line in block.splitlines():
                argv = shlex.split(line.split("  #")[0].split(" # ")[0])
                while argv and re.fullmatch(r"[A-Z_]+=\S*", argv[0]):
                    argv = argv[1:]
                if argv[:1] == ["minilm"]:
                    out.append(argv[1:])
    return out


def test_the_console_script_is_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts == {"minilm": "minilm.course.cli:main"}


def test_the_readme_and_docs_use_only_minilm_subcommands():
    assert {p.name for p in DOCS} >= {"README.md", "students.md", "instructors.md", "grading.md", "training.md",
                                       "benchmarks.md"}
    from minilm.course.train.options import build_parser

    known = {*cli.COMMANDS, *cli.INSTRUCTOR, "help"}
    train_flags = {flag for action in build_parser()._actions for flag in action.option_strings}
    for path in DOCS:
        used = {argv[0] for argv in readme_commands([path])}
        assert used <= known, f"{path.relative_to(ROOT)} shows commands minilm does not have: {used - known}"
        flags = {a.split("=")[0] for argv in readme_commands([path]) if argv[0] == "train" for a in argv
                 if a.startswith("--")}
        assert flags <= train_flags, f"{path.relative_to(ROOT)} shows flags minilm train does not have: " \
                                     f"{flags - train_flags}"
        blocks = "".join(bash_blocks(path))
        assert not re.search(r"python -m (minilm|solutions\.(release|notebooks|make_stubs|export|expected))\b",
                             blocks), \
            f"{path.relative_to(ROOT)}: a module run instead of its minilm subcommand"
    used = {argv[0] for argv in readme_commands()}
    assert {"status", "check", "test", "train", "grade", "release", "notebooks", "stubs", "export", "expected"} <= used
    # The README shows the two commands and the student's loop; everything else is in docs/.
    assert {argv[0] for argv in readme_commands([ROOT / "README.md"])} == {"test", "check", "status", "hint"}
    # docs/training.md names flags in its prose too: each one `minilm train` has.
    named = set(re.findall(r"`(--[a-z][a-z0-9-]*)", (ROOT / "docs" / "training.md").read_text(encoding="utf-8")))
    assert named and named <= train_flags, f"docs/training.md names flags minilm train does not have: " \
                                           f"{named - train_flags}"


def test_help_lists_every_subcommand_and_each_has_complete_help():
    r = minilm("--help")
    assert r.returncode == 0
    for name in (*cli.COMMANDS, *cli.INSTRUCTOR, "help"):
        assert re.search(rf"^\s+{name}\s", r.stdout, flags=re.M), name
    for name in (*cli.COMMANDS, *cli.INSTRUCTOR):
        sub = minilm(name, "--help")
        assert sub.returncode == 0, (name, sub.stderr)
        assert sub.stdout.startswith(f"usage: minilm {name}"), (name, sub.stdout[:200])
        assert "-h, --help" in sub.stdout
        # The description (the paragraph after the usage) is whole: no sentence cut at a docstring's first line.
        description = " ".join(sub.stdout.split("\n\n")[1].split())
        assert description.endswith("."), (name, description)


def test_version_and_the_help_command():
    import importlib.metadata

    r = minilm("--version")
    assert r.returncode == 0 and r.stdout == f"minilm {importlib.metadata.version('minilm')}\n", r.stdout + r.stderr
    r = minilm("help")
    assert r.returncode == 0 and r.stdout == minilm("--help").stdout
    r = minilm("help", "nonsense")
    assert r.returncode == 2 and r.stderr.startswith("minilm: unknown command 'nonsense'")


@pytest.mark.parametrize("name", [*cli.COMMANDS, *cli.INSTRUCTOR])
def test_help_command_is_the_commands_help(name, capsys):
    """`minilm help NAME` prints what `minilm NAME --help` prints (in-process: the same parser)."""
    outputs = []
    for argv in (["help", name], [name, "--help"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and outputs[0].startswith(f"usage: minilm {name}")


# Each command with the arguments it needs, so that the only error is the flag it does not have.
VALID_ARGS = {"check": ["3.1"], "test": ["3.1"], "hint": ["3.1"], "release": ["out"], "site": ["out"],
              "export": ["verify", "bundle.zip"]}


@pytest.mark.parametrize("name", ["", *cli.COMMANDS, *cli.INSTRUCTOR])
def test_a_bad_flag_is_one_line_and_a_pointer_to_help(name, capsys):
    """A usage error: the error and where to look, not argparse's usage block (23 lines for train)."""
    argv = [name, *VALID_ARGS.get(name, []), "--no-such-flag"] if name else ["--no-such-flag"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    prog = f"minilm {name}".strip()
    err = capsys.readouterr().err
    assert err == f"{prog}: error: unrecognized arguments: --no-such-flag\ntry '{prog} --help'\n", err


def test_unknown_command_and_task_get_one_line_naming_the_valid_ones():
    r = minilm("stauts")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "unknown command 'stauts'" in r.stderr and "status, check, test, hint, train, grade" in r.stderr
    for command in ("check", "test", "hint"):
        r = minilm(command, "3.9")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "unknown task id '3.9'" in r.stderr and "3.1, 3.2" in r.stderr


def test_status_and_check_run_the_checks():
    r = minilm("status")
    assert r.returncode == 0 and f"{len(tasks.TASKS)}/{len(tasks.TASKS)} tasks done" in r.stdout, r.stdout
    r = minilm("check", "3.1", "3.2")
    assert r.returncode == 0 and [line[:9] for line in r.stdout.splitlines()] == ["✓ Task 3.", "✓ Task 3."]


def test_test_runs_only_the_tasks_tests_and_the_notebook_only_when_asked():
    r = minilm("test", "3.1", "--impl", "solutions", "--", "--collect-only")
    assert r.returncode == 0, r.stdout + r.stderr
    collected = [line for line in r.stdout.splitlines() if "::" in line or "<" in line]
    assert collected and not any(".ipynb" in line for line in collected)
    assert any("test_rmsnorm.py" in line for line in collected) and not any("test_linear.py" in line
                                                                            for line in collected)
    r = minilm("test", "3.1", "--notebook", "--impl", "solutions", "--", "--collect-only")
    assert any("03_rmsnorm.ipynb" in line for line in r.stdout.splitlines()), r.stdout
    # A task's slow tests (a training run) only with --slow (or --notebook).
    quick = minilm("test", "10.4", "--impl", "solutions", "--", "--collect-only")
    slow = minilm("test", "10.4", "--slow", "--impl", "solutions", "--", "--collect-only")
    assert "test_train_small_model_learns_and_caches" not in quick.stdout, quick.stdout
    assert "test_train_small_model_learns_and_caches" in slow.stdout, slow.stdout
    r = minilm("test", "3.1", "--impl", "solutions", "--", "-x")
    assert r.returncode == 0, r.stdout[-2000:]
    assert re.search(r"\d+ passed", r.stdout)


@pytest.mark.parametrize("name", [*cli.COMMANDS, *cli.INSTRUCTOR])
def test_every_command_is_its_modules_main(name, monkeypatch):
    # One table: each subcommand is a module whose main(argv, prog) gets the rest of the line.
    module = importlib.import_module((cli.COMMANDS | cli.INSTRUCTOR)[name].module)
    seen = {}
    monkeypatch.setattr(module, "main", lambda argv, prog: seen.update(argv=argv, prog=prog) or 0)
    assert cli.main([name, "--some", "args"]) == 0
    assert seen == {"argv": ["--some", "args"], "prog": f"minilm {name}"}


def test_regenerate_runs_stubs_then_the_tasks_checks_then_their_notebooks(monkeypatch):
    from solutions import expected, make_stubs, notebooks, regenerate

    calls = []
    for module in (make_stubs, expected, notebooks):
        monkeypatch.setattr(module, "main", lambda argv, m=module: calls.append((m.__name__, argv)) or 0)
    assert regenerate.main(["--task", "4.1", "--task", "4.3", "--task", "5.2"]) == 0
    assert calls == [("solutions.make_stubs", []),
                     ("solutions.expected", ["--task", "4.1", "--task", "4.3", "--task", "5.2"]),
                     ("solutions.notebooks", ["04_swiglu", "05_rope"])]
    calls.clear()
    with pytest.raises(SystemExit):
        regenerate.main(["--task", "3.9"])
    assert calls == []  # nothing rewritten for a typo


def test_the_python_m_forms_keep_working():
    for module in ("minilm", "minilm.course.train", "solutions.grading"):
        r = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
        assert r.returncode == 0 and r.stdout.startswith("usage:"), (module, r.stderr)


def test_instructor_commands_are_offered_only_where_solutions_is_installed(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(cli.tasks, "ROOT", tmp_path)  # a course with no solutions/ beside it
    assert cli.instructor_commands() == {}
    assert cli.main(["release", "out"]) == 2
    assert capsys.readouterr().err.startswith("minilm release: an instructor's command; it needs the reference")
    assert cli.main(["nonsense"]) == 2
    assert capsys.readouterr().err == ("minilm: unknown command 'nonsense'; "
                                       "the commands are: status, check, test, hint, train\n")
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "release" not in capsys.readouterr().out
