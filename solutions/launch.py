"""One-click launch: the Binder and Colab badges, and the notebooks' install cell.

The course's public repository is pyproject.toml's `[project.urls] Repository` (a GitHub address) and a
release is its tag `v<version>` (pyproject's version). From them:

- `badges(notebook)`: "Open in Colab" (that notebook, at the release's tag) and Binder (built from the
  repository's environment.yml, opening that notebook in JupyterLab); the README shows notebook 00's.
- `install_cell_source()`: a code cell that, only in a hosted kernel (Colab, Binder) where `minilm` does not
  import, clones the course at the release's tag (in Colab into Google Drive, mounted by the cell, so that
  the student's files outlive the session and every notebook finds them; where Drive is refused, into the
  session's folder, saying so), installs it editable without dependencies, then only the dependencies the
  kernel lacks (Colab's own torch and ipywidgets 7 stay), and puts it on the path; anywhere else it does
  nothing and prints nothing.
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


DRIVE = "/content/drive"  # where Colab mounts Google Drive
# What a hosted kernel needs besides what it has: jupyterlab is the local front end, which Colab and Binder
# bring their own of; a package the kernel already has (Colab's torch, numpy, its ipywidgets 7) stays as it is.
HOSTED_SKIP = ("jupyterlab",)


def hosted_requirements() -> list[str]:
    """pyproject's dependencies that the install cell installs where the kernel lacks them."""
    return [r for r in _project()["dependencies"] if re.match(r"[\w.-]+", r).group(0) not in HOSTED_SKIP]


def _wrapped(items: list[str]) -> str:
    """A list literal for the cell, broken into lines a reader can see whole."""
    lines, line = [], ""
    for item in map(json.dumps, items):
        if line and len(line) + len(item) > 80:
            lines.append(line)
            line = ""
        line += item + ", "
    return "[\n" + "".join(f"            {line.rstrip()}\n" for line in [*lines, line]) + "        ]"


def install_cell_source(drive: str = DRIVE) -> str:
    """The install cell's code: stdlib only (it runs where nothing else is installed), silent where it does nothing."""
    return f"""# Colab or Binder without the course: install it ({release_tag()}); anywhere else this cell does nothing.
import importlib.util
import os
import sys

if importlib.util.find_spec("minilm") is None and (
        "google.colab" in sys.modules or any(key.startswith("BINDER_") for key in os.environ)):
    import importlib.metadata
    import re
    import subprocess

    home = os.getcwd()
    if "google.colab" in sys.modules:  # keep your files in Google Drive, so that every notebook finds them
        try:
            from google.colab import drive
            drive.mount({json.dumps(drive)})
            home = os.path.join({json.dumps(drive)}, "MyDrive")
            os.environ.setdefault("MINILM_DATA_DIR", os.path.join(home, {json.dumps(SRC)}, "data"))
        except Exception as e:
            print(f"Google Drive is not mounted ({{e}}): your files last only as long as this Colab session")
    course = os.path.join(home, {json.dumps(SRC)}, "minilm")  # your files: {SRC}/minilm/minilm/*.py
    if not os.path.isdir(course):
        subprocess.run(["git", "-c", "advice.detachedHead=false", "clone", "--quiet", "--depth", "1",
                        "--branch", {json.dumps(release_tag())}, {json.dumps(repository_url())}, course], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "-e", course], check=True)
    missing = []  # only what this kernel lacks: Colab's torch and ipywidgets stay as they are
    for requirement in {_wrapped(hosted_requirements())}:
        try:
            importlib.metadata.version(re.match(r"[\\w.-]+", requirement).group(0))
        except importlib.metadata.PackageNotFoundError:
            missing.append(requirement)
    if missing:
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-warn-conflicts"]
        subprocess.run([*pip, *missing], check=True)
    sys.path.insert(0, course)
    print(f"minilm: your files are in {{course}}/minilm/")"""


def badge_cell_source(notebook: str) -> str:
    return (f"{badges(notebook)}\n\n"
            "*No local install?* Open this notebook in Colab or on Binder; the next cell installs the course there "
            "(and does nothing anywhere else). In Colab it asks for your Google Drive, where your files stay "
            "from one notebook to the next.")


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
