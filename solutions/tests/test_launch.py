"""One-click launch (solutions/launch.py): the badges point at the repository's own paths, every notebook
holds the launch cells, and the install cell installs the course only in a hosted kernel that lacks it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from urllib.parse import unquote

import nbformat
import pytest

from minilm.course.tasks import ROOT
from solutions import launch, notebooks

# Runs the install cell in a python started with -I -S (no site-packages, no PYTHONPATH: `minilm` cannot
# import, as in a fresh Colab kernel), with subprocess.run recording instead of running: nothing is downloaded.
HARNESS = """
import json, subprocess, sys, types
calls = []
subprocess.run = lambda argv, **kw: calls.append([argv, kw]) or subprocess.CompletedProcess(argv, 0)
if sys.argv[1] == "colab":
    sys.modules["google.colab"] = types.ModuleType("google.colab")
before = list(sys.path)
exec(compile(sys.stdin.read(), "install-cell", "exec"), {"__name__": "__main__"})
print(json.dumps({"calls": calls, "path": [p for p in sys.path if p not in before], "python": sys.executable}))
"""


def run_cell(where: str, tmp_path, isolated: bool = True, **env) -> dict:
    flags = ["-I", "-S"] if isolated else []
    base = {k: v for k, v in os.environ.items() if not k.startswith("BINDER_")}
    r = subprocess.run([sys.executable, *flags, "-c", HARNESS, where], input=launch.install_cell_source(),
                       cwd=tmp_path, env={**base, **env}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_fresh_kernel_cannot_import_the_course():
    r = subprocess.run([sys.executable, "-I", "-S", "-c", "import minilm"], capture_output=True, text=True,
                       cwd="/", timeout=60)
    assert r.returncode != 0 and "No module named 'minilm'" in r.stderr


@pytest.mark.parametrize("where,env", [("colab", {}), ("binder", {"BINDER_LAUNCH_HOST": "https://mybinder.org/"})])
def test_the_install_cell_installs_the_release_in_a_hosted_kernel_without_the_course(where, env, tmp_path):
    got = run_cell(where, tmp_path, **env)
    course = str(tmp_path.resolve() / launch.SRC)
    owner, name = launch.repository()
    assert got["calls"] == [[[got["python"], "-m", "pip", "install", "--quiet", "--src", course, "-e",
                              f"git+https://github.com/{owner}/{name}@v0.1.0#egg=minilm"], {"check": True}]]
    assert got["calls"][0][0] == launch.pip_command(got["python"], course)
    assert got["path"] == [os.path.join(course, "minilm")]  # the clone, where pip -e puts it, imports at once


def test_the_install_cell_does_nothing_elsewhere(tmp_path):
    assert run_cell("local", tmp_path) == {"calls": [], "path": [], "python": sys.executable}  # no minilm, not hosted
    # Hosted, but the course imports (Binder builds it from environment.yml; a local kernel has it): nothing.
    got = run_cell("colab", tmp_path, isolated=False, PYTHONPATH=str(ROOT))
    assert got["calls"] == [] and got["path"] == []


def test_every_notebook_has_the_launch_cells_and_its_own_badges():
    for path in notebooks.notebook_paths():
        nb = nbformat.read(path, as_version=4)
        assert not launch.add_launch_cells(nb, path.relative_to(ROOT).as_posix()), \
            f"{path.name}: its launch cells are missing or stale: run `minilm notebooks --launch-cells`"
        cells = [c for c in nb.cells if launch.TAG in c.metadata.get("tags", [])]
        install = cells[1]
        assert nb.cells.index(install) == next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        assert install.outputs == [], f"{path.name}: the install cell must store no output (nbval compares it)"
        assert launch.colab_url(f"notebooks/{path.name}") in cells[0].source


def test_the_badges_point_at_the_repositorys_own_paths():
    owner, name = launch.repository()
    tag = launch.release_tag()
    colab, binder = launch.colab_url(), launch.binder_url()
    assert colab == f"https://colab.research.google.com/github/{owner}/{name}/blob/{tag}/notebooks/00_welcome.ipynb"
    assert binder.startswith(f"https://mybinder.org/v2/gh/{owner}/{name}/{tag}?urlpath=")
    opened = unquote(binder.split("urlpath=")[1]).removeprefix("lab/tree/")
    assert (ROOT / opened).is_file() and (ROOT / colab.split(f"/blob/{tag}/")[1]).is_file()
    assert (ROOT / "environment.yml").is_file()  # what Binder builds the kernel from
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert launch.badges() in readme.split("\n## ")[0], "README: the badges under the title are stale"
    welcome = nbformat.read(ROOT / launch.WELCOME, as_version=4)
    assert launch.badges() in "".join(c.source for c in welcome.cells[:3])


def test_widget_outputs_keep_a_picture_from_the_widget_state():
    nb = nbformat.v4.new_notebook()
    view = {"model_id": "box", "version_major": 2, "version_minor": 0}
    nb.cells = [nbformat.v4.new_code_cell("display(w)", outputs=[nbformat.v4.new_output(
        "display_data", data={notebooks.WIDGET_VIEW: view, "text/plain": "VBox(children=(…))"})])]
    nb.metadata["widgets"] = {notebooks.WIDGET_STATE: {"state": {
        "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_slider", "IPY_MODEL_img"]}},
        "slider": {"model_name": "IntSliderModel", "state": {}},
        "img": {"model_name": "ImageModel", "state": {"format": "png"},
                "buffers": [{"path": ["value"], "data": "iVBORw0K", "encoding": "base64"}]}}}}
    assert notebooks.widget_pictures(nb) == 1
    assert nb.cells[0].outputs[0]["data"]["image/png"] == "iVBORw0K"
