"""One-click launch (solutions/launch.py): the badges point at the repository's own paths, every notebook
holds the launch cells, and the install cell installs the course only in a hosted kernel that lacks it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from urllib.parse import unquote

import nbformat

from minilm.course.tasks import ROOT
from solutions import launch, notebooks

# Runs the install cell in a python started with -I -S (no site-packages, no PYTHONPATH: `minilm` cannot
# import, as in a fresh Colab kernel), with subprocess.run recording instead of running (nothing is
# downloaded), importlib.metadata answering from the given installed packages, and in Colab a Google
# Drive that mounts (or refuses, with "refused") into the given folder.
HARNESS = """
import importlib.metadata, json, os, subprocess, sys, types
where, drive_state, installed = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
calls = []
subprocess.run = lambda argv, **kw: calls.append(argv) or subprocess.CompletedProcess(argv, 0)
def version(name):
    if name not in installed:
        raise importlib.metadata.PackageNotFoundError(name)
    return installed[name]
importlib.metadata.version = version
if where == "colab":
    colab, drive = types.ModuleType("google.colab"), types.ModuleType("google.colab.drive")
    def mount(path):
        if drive_state == "refused":
            raise ValueError("mount failed")
        os.makedirs(os.path.join(path, "MyDrive"), exist_ok=True)
    drive.mount, colab.drive = mount, drive
    sys.modules.update({"google": types.ModuleType("google"), "google.colab": colab, "google.colab.drive": drive})
before = list(sys.path)
exec(compile(sys.stdin.read(), "install-cell", "exec"), {"__name__": "__main__"})
print(json.dumps({"calls": calls, "path": [p for p in sys.path if p not in before], "python": sys.executable,
                  "data_dir": os.environ.get("MINILM_DATA_DIR")}))
"""
# Colab's own packages (its runtime ships these; ipywidgets 7, not 8)
COLAB = {"torch": "2.9.0", "numpy": "2.0.2", "matplotlib": "3.10.0", "ipywidgets": "7.7.1", "ipykernel": "6.17.1",
         "regex": "2024.11.6", "tqdm": "4.67.1", "jupyterlab": "4.0.0"}


def run_cell(where: str, tmp_path, isolated: bool = True, drive: str = "mounts", installed: dict | None = None,
             **env) -> dict:
    flags = ["-I", "-S"] if isolated else []
    base = {k: v for k, v in os.environ.items() if not k.startswith("BINDER_") and k != "MINILM_DATA_DIR"}
    r = subprocess.run([sys.executable, *flags, "-c", HARNESS, where, drive, json.dumps(installed or {})],
                       input=launch.install_cell_source(drive=str(tmp_path / "drive")), cwd=tmp_path,
                       env={**base, **env}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return {**json.loads(r.stdout.splitlines()[-1]), "printed": r.stdout.splitlines()[:-1]}


def test_a_fresh_kernel_cannot_import_the_course():
    r = subprocess.run([sys.executable, "-I", "-S", "-c", "import minilm"], capture_output=True, text=True,
                       cwd="/", timeout=60)
    assert r.returncode != 0 and "No module named 'minilm'" in r.stderr


def _clone(course):
    owner, name = launch.repository()
    return ["git", "-c", "advice.detachedHead=false", "clone", "--quiet", "--depth", "1", "--branch", "v0.1.0",
            f"https://github.com/{owner}/{name}", course]


def test_in_colab_the_course_goes_to_google_drive_and_colabs_own_packages_stay(tmp_path):
    got = run_cell("colab", tmp_path, installed=COLAB)
    course = str(tmp_path / "drive" / "MyDrive" / launch.SRC / "minilm")
    python = got["python"]
    assert got["calls"] == [
        _clone(course),
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "-e", course],
        # only what Colab lacks: not its torch, nor its ipywidgets 7, nor a JupyterLab it does not use
        [python, "-m", "pip", "install", "--quiet", "--no-warn-conflicts", "einops>=0.7", "jaxtyping>=0.2.25",
         "tiktoken>=0.6"]]
    assert got["path"] == [course] and got["printed"] == [f"minilm: your files are in {course}/minilm/"]
    assert got["data_dir"] == str(tmp_path / "drive" / "MyDrive" / launch.SRC / "data")  # runs outlive the session
    # The next notebook, on a fresh machine: the student's files are in Drive already, and stay as they are.
    os.makedirs(course)
    again = run_cell("colab", tmp_path, installed={**COLAB, "einops": "0.8", "jaxtyping": "0.3", "tiktoken": "0.9"})
    assert again["calls"] == [[python, "-m", "pip", "install", "--quiet", "--no-deps", "-e", course]]


def test_in_colab_without_drive_it_says_the_files_are_temporary(tmp_path):
    got = run_cell("colab", tmp_path, drive="refused", installed=COLAB)
    course = str(tmp_path.resolve() / launch.SRC / "minilm")
    assert got["calls"][0] == _clone(course) and got["path"] == [course] and got["data_dir"] is None
    assert got["printed"][0] == ("Google Drive is not mounted (mount failed): your files last only as long as this "
                                 "Colab session")


def test_on_binder_without_the_course_it_installs_everything_beside_the_notebook(tmp_path):
    got = run_cell("binder", tmp_path, BINDER_LAUNCH_HOST="https://mybinder.org/")
    course = str(tmp_path.resolve() / launch.SRC / "minilm")
    assert got["calls"][:2] == [_clone(course), [got["python"], "-m", "pip", "install", "--quiet", "--no-deps", "-e",
                                                 course]]
    assert got["calls"][2][-len(launch.hosted_requirements()):] == launch.hosted_requirements()
    assert not any("jupyterlab" in r for r in launch.hosted_requirements())  # Binder and Colab bring their own


def test_the_install_cell_does_nothing_elsewhere(tmp_path):
    got = run_cell("local", tmp_path)  # no minilm, not hosted
    assert got["calls"] == [] and got["path"] == [] and got["printed"] == []
    # Hosted, but the course imports (Binder builds it from environment.yml; a local kernel has it): nothing.
    got = run_cell("colab", tmp_path, isolated=False, PYTHONPATH=str(ROOT))
    assert got["calls"] == [] and got["path"] == [] and got["printed"] == []
    assert not (tmp_path / "drive").exists()  # nor is Drive mounted


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
        "img": {"model_name": "ImageModel", "state": {"format": "png", "layout": "IPY_MODEL_size"},
                "buffers": [{"path": ["value"], "data": "iVBORw0K", "encoding": "base64"}]},
        "size": {"model_name": "LayoutModel", "state": {"width": "558px", "height": "504px"}}}}}
    assert notebooks.widget_pictures(nb) == 1
    assert nb.cells[0].outputs[0]["data"]["image/png"] == "iVBORw0K"
    # shown at the Image's display size: an explorer's PNG has twice as many pixels (viz/picture.py)
    assert nb.cells[0].outputs[0]["metadata"]["image/png"] == {"width": 558, "height": 504}


def test_consecutive_outputs_on_one_stream_are_stored_as_one():
    nb = nbformat.v4.new_notebook()
    out = nbformat.v4.new_output
    nb.cells = [nbformat.v4.new_code_cell("print(1); print(2)", outputs=[
        out("stream", name="stdout", text="1\n"), out("stream", name="stdout", text="2\n"),
        out("stream", name="stderr", text="w\n"), out("stream", name="stdout", text="3\n")])]
    notebooks.merge_streams(nb)
    assert [(o.name, o.text) for o in nb.cells[0].outputs] == [("stdout", "1\n2\n"), ("stderr", "w\n"),
                                                             ("stdout", "3\n")]
