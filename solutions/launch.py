"""One-click launch: the Binder and Colab badges, and the notebooks' install cell.

The course's public repository is pyproject.toml's `[project.urls] Repository` (a GitHub address) and a
release is its tag `v<version>` (pyproject's version). From them:

- `badges(notebook)`: "Open in Colab" (that notebook, at the release's tag) and Binder (built from the
  repository's environment.yml, opening that notebook in JupyterLab); the README shows notebook 00's.
- `install_cell()`: a code cell that, only in a hosted kernel (Colab, Binder) where `minilm` does not
  import, installs the course from the repository at the release's tag (pip, editable, so the student's
  files sit beside the notebook) and puts it on the path; anywhere else it does nothing and prints nothing.
- `add_launch_cells(nb)`: every notebook gets both, right after its title cell, as cells tagged
  `minilm-launch` (refreshed in place when there already).

    minilm notebooks --launch-cells     # insert or refresh them in every notebook, without running any

`minilm notebooks` (a run) adds them too; solutions/tests/test_launch.py fails while a notebook lacks them.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import nbformat
import tomllib

from minilm.course.tasks import ROOT

TAG = "minilm-launch"  # the cell tag of the launch cells
WELCOME = "notebooks/00_welcome.ipynb"
SRC = "minilm-course"  # where pip clones the course in a hosted kernel (relative to the notebook's folder)


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def repository() -> tuple[str, str]:
    """(owner, name) of the course's GitHub repository, from pyproject.toml's [project.urls] Repository."""
    url = _project().get("urls", {}).get("Repository", "")
    found = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", url)
    if not found:
        raise ValueError(f"pyproject.toml's [project.urls] Repository is not a GitHub address: {url!r}")
    return found.group(1), found.group(2)


def release_tag() -> str:
    return f"v{_project()['version']}"


def repository_url() -> str:
    owner, name = repository()
    return f"https://github.com/{owner}/{name}"


def colab_url(notebook: str = WELCOME) -> str:
    owner, name = repository()
    return f"https://colab.research.google.com/github/{owner}/{name}/blob/{release_tag()}/{notebook}"


def binder_url(notebook: str = WELCOME) -> str:
    owner, name = repository()
    return f"https://mybinder.org/v2/gh/{owner}/{name}/{release_tag()}?urlpath={quote('lab/tree/' + notebook)}"


COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BINDER_BADGE = "https://mybinder.org/badge_logo.svg"


def badges(notebook: str = WELCOME) -> str:
    """The two badges, one line of Markdown."""
    return (f"[![Open in Colab]({COLAB_BADGE})]({colab_url(notebook)}) "
            f"[![Launch on Binder]({BINDER_BADGE})]({binder_url(notebook)})")


def pip_command(python: str, course: str) -> list[str]:
    """The install cell's pip command (`python`: the kernel's sys.executable; `course`: the clone's folder)."""
    return [python, "-m", "pip", "install", "--quiet", "--src", course, "-e",
            f"git+{repository_url()}@{release_tag()}#egg=minilm"]


def install_cell_source() -> str:
    """The install cell's code: stdlib only (it runs where nothing else is installed), silent where it does nothing."""
    url = pip_command("", "")[-1]
    return f"""# Colab or Binder without the course: install it ({release_tag()}); anywhere else this cell does nothing.
import importlib.util
import os
import sys

if importlib.util.find_spec("minilm") is None and (
        "google.colab" in sys.modules or any(key.startswith("BINDER_") for key in os.environ)):
    import subprocess

    course = os.path.abspath({json.dumps(SRC)})  # your files: {SRC}/minilm/minilm/*.py
    url = {json.dumps(url)}
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--src", course, "-e", url], check=True)
    sys.path.insert(0, os.path.join(course, "minilm"))"""


def badge_cell_source(notebook: str) -> str:
    return (f"{badges(notebook)}\n\n"
            "*No local install?* Open this notebook in Colab or on Binder; the next cell installs the course there "
            "(and does nothing anywhere else).")


def _launch(cell) -> bool:
    return TAG in cell.get("metadata", {}).get("tags", [])


def add_launch_cells(nb, notebook: str) -> bool:
    """Insert (after the title cell) or refresh the badge and install cells; True when `nb` changed. A first
    insertion renumbers the stored execution counts as a run would (the install cell is the first code cell)."""
    badge = nbformat.v4.new_markdown_cell(badge_cell_source(notebook), metadata={"tags": [TAG]})
    install = nbformat.v4.new_code_cell(install_cell_source(), metadata={"tags": [TAG]})
    existing = [i for i, c in enumerate(nb.cells) if _launch(c)]
    if existing:
        at = existing[0]
        old = [nb.cells[i] for i in existing]
        if [(c.cell_type, c.source) for c in old] == [("markdown", badge.source), ("code", install.source)]:
            return False
        install.execution_count = next((c.get("execution_count") for c in old if c.cell_type == "code"), None)
        nb.cells = [c for c in nb.cells if not _launch(c)]
    else:
        at = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
        counted = [c for c in nb.cells if c.cell_type == "code" and c.get("execution_count")]
        if counted:
            for c in counted:
                c.execution_count += 1
            install.execution_count = 1
    badge.id, install.id = f"{TAG}-badges", f"{TAG}-install"  # fixed ids: the same file on every run
    nb.cells[at:at] = [badge, install]
    return True


def update_notebooks(paths) -> list[str]:
    """Add or refresh the launch cells of each notebook at `paths`; the names of those changed."""
    changed = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if add_launch_cells(nb, path.relative_to(ROOT).as_posix()):
            nbformat.write(nb, path)
            changed.append(path.name)
    return changed
