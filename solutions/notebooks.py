"""Regenerate every notebook's stored outputs from the reference implementation.

    minilm notebooks                 # all notebooks/NN_*.ipynb
    minilm notebooks 05_rope 06      # some of them (by name or number prefix)
    minilm notebooks --launch-cells  # only insert or refresh the launch cells (solutions/launch.py), running nothing

Runs each notebook top to bottom in a fresh kernel with MINILM_IMPL=solutions and progress
bars off, then stores it with sequential execution counts and without widget state, so the
stored outputs are exactly what nbval compares against and diffs stay small. Before it runs one, it adds
the notebook's launch cells (the Colab and Binder badges, the install cell: solutions/launch.py). A widget
output keeps a still picture of the widget (its Image widgets' PNG, from the widget state, which is then
dropped): GitHub, nbviewer and the course's site show that picture where JupyterLab shows the live widget.
Fails, writing nothing for that notebook, if a cell raises unexpectedly.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from minilm.course.cli import Parser, summary
from minilm.course.nbenv import kernel_env
from minilm.course.tasks import ROOT, course_notebooks
from solutions import launch

NOTEBOOKS = ROOT / "notebooks"


def notebook_paths(selectors: list[str] | None = None) -> list[Path]:
    paths = course_notebooks(NOTEBOOKS)
    if selectors:
        chosen = [p for p in paths if any(p.stem == s or p.stem.startswith(s) for s in selectors)]
        unknown = [s for s in selectors if not any(p.stem == s or p.stem.startswith(s) for p in paths)]
        if unknown:
            raise SystemExit(f"no notebook matches {', '.join(unknown)}; notebooks: {', '.join(p.stem for p in paths)}")
        return chosen
    return paths


def expects_error(cell) -> bool:
    return "raises-exception" in cell.metadata.get("tags", []) or "NBVAL_RAISES_EXCEPTION" in cell.source


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def widget_pictures(nb) -> int:
    """Give each widget output the PNG of the Image widget(s) inside it (from the notebook's widget state),
    as that output's `image/png`, with the Image's display size (its layout's width and height in px) as
    that picture's width and height: an explorer's PNG has twice its display size in pixels (viz/picture.py).
    Renderers without the live widget show it. The number of outputs given one."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})

    def pixels(value) -> int | None:
        return int(value[:-2]) if isinstance(value, str) and value.endswith("px") and value[:-2].isdigit() else None

    def size(image_state: dict) -> dict:
        layout = state.get(str(image_state.get("layout", "")).removeprefix("IPY_MODEL_"), {}).get("state", {})
        shown = {key: pixels(layout.get(key)) for key in ("width", "height")}
        return {key: value for key, value in shown.items() if value}

    def images(model_id: str, seen: set) -> list[tuple[str, dict]]:
        if model_id in seen or model_id not in state:
            return []
        seen.add(model_id)
        model = state[model_id]
        if model.get("model_name") == "ImageModel" and model.get("state", {}).get("format") == "png":
            return [(b["data"], size(model["state"])) for b in model.get("buffers", []) if b.get("path") == ["value"]]
        children = model.get("state", {}).get("children", [])
        return [png for child in children if isinstance(child, str)
                for png in images(child.removeprefix("IPY_MODEL_"), seen)]

    given = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_VIEW)
            pngs = images(view["model_id"], set()) if view else []
            if pngs:
                data, shown = pngs[0]
                out["data"]["image/png"] = data
                if shown:
                    out.setdefault("metadata", {})["image/png"] = shown
                given += 1
    return given


def merge_streams(nb) -> None:
    """Join each cell's consecutive outputs on the same stream into one, as JupyterLab shows them and nbval
    compares them: how the kernel split them depends on when it flushed, which a busy machine changes."""
    for cell in nb.cells:
        merged = []
        for out in cell.get("outputs", []):
            last = merged[-1] if merged else None
            if (out.output_type == "stream" and last is not None and last.output_type == "stream"
                    and last.name == out.name):
                last.text += out.text
            else:
                merged.append(out)
        if "outputs" in cell:
            cell.outputs = merged


def run(path: Path, timeout: int = 600) -> float:
    nb = nbformat.read(path, as_version=4)
    launch.add_launch_cells(nb, path.relative_to(ROOT).as_posix())
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    start = time.perf_counter()
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    elapsed = time.perf_counter() - start
    for i, cell in enumerate(nb.cells):
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if errors and not expects_error(cell):
            e = errors[0]
            raise SystemExit(f"{path.name} cell {i} raised {e.ename}: {e.evalue}\n{cell.source[:300]}")
    widget_pictures(nb)
    merge_streams(nb)
    nb.metadata.pop("widgets", None)  # widget state churns on every run; nbval does not need it
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str] | None = None, prog: str = "minilm notebooks") -> int:
    parser = Parser(prog=prog, description=summary(__doc__))
    parser.add_argument("notebooks", nargs="*", help="names or number prefixes (default: all)")
    parser.add_argument("--launch-cells", action="store_true",
                        help="only insert or refresh each notebook's launch cells (badges, install cell); run nothing")
    args = parser.parse_args(argv)
    if args.launch_cells:
        changed = launch.update_notebooks(notebook_paths(args.notebooks))
        print(f"launch cells added or refreshed in {len(changed)} notebooks" + (f": {', '.join(changed)}"
                                                                               if changed else ""))
        return 0
    os.environ["MINILM_IMPL"] = "solutions"
    for key, value in kernel_env().items():
        os.environ.setdefault(key, value)
    for path in notebook_paths(args.notebooks):
        print(f"{path.name}: {run(path):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
