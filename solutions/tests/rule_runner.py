"""Run check cells on variants of the reference, each in a forked child of one process (instructor tests).

    python -m solutions.tests.rule_runner JOBS.json    # {name: {"files": {module: source}, "tasks": [id, …]}}

prints one JSON line, {name: {task: [status, message]}}. Each variant is the reference with its `files` in
place of the reference's modules, in a folder of its own: the check cells judge it as they judge a
student's minilm/ (MINILM_IMPL=solutions), the from-scratch rule included.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

SECONDS = 60  # one variant's checks; the reference's take a second or two


def _variant(files: dict[str, str], task_ids: list[str], home: Path) -> dict[str, list[str]]:
    from minilm.course import checks, tasks

    pkg = home / "solutions"
    pkg.mkdir()
    for m in tasks.EXERCISE_MODULES:
        shutil.copy(tasks.ROOT / "solutions" / f"{m}.py", pkg / f"{m}.py")
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    for module, source in files.items():
        (pkg / f"{module}.py").write_text(source, encoding="utf-8")
    for name in [n for n in sys.modules if n == "solutions" or n.startswith("solutions.")]:
        del sys.modules[name]
    sys.path.insert(0, str(home))
    os.chdir(home)  # what a variant writes lands in its own folder
    return {t: [v.status, v.line] for t, v in zip(task_ids, checks.run_many(task_ids))}


def main() -> int:
    jobs = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    os.environ["MINILM_IMPL"] = "solutions"
    import torch
    import torch._dynamo  # noqa: F401 - once here, not in every child

    from minilm.course import checks, exercises

    exercises.load()
    checks.expected_outputs()
    torch.set_num_threads(1)
    results = {}
    for name, job in jobs.items():
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            signal.alarm(SECONDS)
            try:
                with tempfile.TemporaryDirectory() as home:
                    out = _variant(job["files"], job["tasks"], Path(home))
            except BaseException as e:  # noqa: BLE001
                out = {t: ["crash", f"{type(e).__name__}: {e}"] for t in job["tasks"]}
            os.write(write_end, json.dumps(out).encode())
            os._exit(0)
        os.close(write_end)
        chunks = []
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
        os.close(read_end)
        os.waitpid(pid, 0)
        results[name] = json.loads(b"".join(chunks) or b"null")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
