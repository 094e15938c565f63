"""Helpers for tests/test_browser.py: Playwright and Chromium (installed on demand where that is
allowed), a throwaway JupyterLab server, and a notebook driven in it.

Nothing here touches the committed notebooks, the user's Jupyter settings or their kernels'
environment: the server serves a temporary copy of notebooks/ with its own settings, workspaces,
runtime and config directories.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from minilm.course.nbenv import kernel_env

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-quic", "--disable-sync"]
SKIP = "browser test skipped: "
# What it needs, installed by .ci/run on CI and by hand elsewhere; the test itself installs nothing.
NEEDS = "apt-get install chromium fonts-dejavu-core; pip install playwright"


class Unavailable(Exception):
    """The browser test cannot run here; the message is the one line to skip with."""


# ---------------------------------------------------------------- Playwright and Chromium


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _have_playwright() -> bool:
    importlib.invalidate_caches()
    return importlib.util.find_spec("playwright") is not None


def chromium_path() -> str:
    return os.environ.get("MINILM_CHROMIUM", "").strip() or DEFAULT_CHROMIUM


def skip_reason() -> str | None:
    """The one line to skip with when the browser test cannot run here, else None. Cheap (no
    imports): the test module asks at collection."""
    chromium = chromium_path()
    if not _executable(chromium):
        where = " (from MINILM_CHROMIUM)" if os.environ.get("MINILM_CHROMIUM", "").strip() else ""
        return f"{SKIP}no Chromium or Chrome at {chromium}{where} ({NEEDS}, or set MINILM_CHROMIUM=/path/to/chrome)"
    if not _have_playwright():
        return f"{SKIP}the playwright package is not installed ({NEEDS})"
    return None


def ensure_browser() -> str:
    """The Chromium executable to drive, with the playwright package importable; raises
    Unavailable with one line when the test cannot run."""
    reason = skip_reason()
    if reason:
        raise Unavailable(reason)
    return chromium_path()


# ---------------------------------------------------------------- a throwaway JupyterLab


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Settings for this server only: no autosave (the notebooks are copies anyway), no news or
# update toasts over the screenshots, and every cell attached to the page (no windowing), so
# that outputs far down the notebook are real DOM that can be counted.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}


class LabServer:
    """`python -m jupyter lab` on 127.0.0.1, token- and password-less, serving a copy of
    notebooks/ from `workdir`; MINILM_IMPL=impl in its kernels (impl=None: none at all)."""

    def __init__(self, workdir: Path, impl: str | None):
        self.workdir, self.impl = workdir, impl
        self.notebooks = workdir / "notebooks"
        self.log_path = workdir / "jupyter.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _prepare(self) -> dict[str, str]:
        shutil.copytree(ROOT / "notebooks", self.notebooks,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        settings = self.workdir / "settings"
        for plugin, values in LAB_SETTINGS.items():
            path = settings / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values), encoding="utf-8")
        for d in ("workspaces", "runtime", "config", "ipython", "data"):
            (self.workdir / d).mkdir(exist_ok=True)
        # The notebook-signing secret and signature database, kept out of ~/.local/share/jupyter.
        (self.workdir / "config" / "jupyter_server_config.json").write_text(
            json.dumps({"NotebookNotary": {"data_dir": str(self.workdir / "data")}}), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k not in ("MINILM_IMPL", "MPLBACKEND")}
        env.update(kernel_env())
        env.update(JUPYTER_RUNTIME_DIR=str(self.workdir / "runtime"), JUPYTER_CONFIG_DIR=str(self.workdir / "config"),
                   IPYTHONDIR=str(self.workdir / "ipython"),
                   # The kernel imports the same minilm as this test, whatever the kernel's cwd.
                   PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p))
        if self.impl:
            env["MINILM_IMPL"] = self.impl
        return env

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "jupyter", "lab", "--no-browser",
                "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                "--IdentityProvider.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
                f"--ServerApp.root_dir={self.notebooks}", "--ServerApp.terminals_enabled=False",
                f"--LabApp.user_settings_dir={self.workdir / 'settings'}",
                f"--LabApp.workspaces_dir={self.workdir / 'workspaces'}",
                "--LabApp.expose_app_in_browser=True", "--LabApp.extension_manager=readonly",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])]

    def start(self, timeout: float = 90.0) -> None:
        env = self._prepare()
        for _attempt in range(3):  # another process may take the free port before the server binds it
            self.port = _free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(self._command(), cwd=self.workdir, env=env, stdout=log,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=(os.name == "posix"))
            if self._wait_ready(timeout):
                return
            if "already in use" not in self.log_tail():
                break
        code = self.proc.poll()
        self.stop()
        what = f"exited with code {code}" if code is not None else f"did not answer within {timeout:.0f} s"
        raise RuntimeError(f"JupyterLab on {self.url} {what}\n--- jupyter server log (tail):\n{self.log_tail()}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}/api/status", timeout=2) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        return False

    def api(self, method: str, path: str) -> object:
        req = urllib.request.Request(f"{self.url}{path}", method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """End every kernel of this server (between notebooks, and before stopping it)."""
        with contextlib.suppress(Exception):
            for kernel in self.api("GET", "/api/kernels"):
                with contextlib.suppress(Exception):
                    self.api("DELETE", f"/api/kernels/{kernel['id']}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.shutdown_kernels()
        try:
            import psutil  # ipykernel's dependency; finds kernels outside the server's process group
            leftovers = psutil.Process(self.proc.pid).children(recursive=True)
        except Exception:
            leftovers = []
        if self.proc.poll() is None:
            try:
                if os.name == "posix":
                    os.killpg(self.proc.pid, signal.SIGTERM)
                else:
                    self.proc.terminate()
                self.proc.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL) if os.name == "posix" else self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=10)
        for child in leftovers:
            with contextlib.suppress(Exception):
                child.kill()
        self.proc = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


# ---------------------------------------------------------------- a notebook in the Lab


# JavaScript run in the page. `panel(path)` is the open NotebookPanel of that file.
JS_PANEL = """(path) => window.jupyterapp && Array.from(window.jupyterapp.shell.widgets('main'))
    .find(w => w.context && w.context.path === path && w.content && w.sessionContext)"""


def js(body: str) -> str:
    """A page function `(path) => …` with `panel` bound to that notebook's NotebookPanel."""
    return f"(path) => {{ const panel = ({JS_PANEL})(path); {body} }}"


JS_OPENED = js("return !!(panel && panel.context.isReady && panel.sessionContext.session "
               "&& panel.sessionContext.session.kernel && panel.content.widgets.length > 0);")

# Clear every output and execution count, then start running all cells (without waiting).
# Returns what the clearing left: code cells that still have outputs or an execution count.
JS_RUN_ALL = js("""
    window.jupyterapp.shell.activateById(panel.id);
    return window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs').then(() => {
        const left = panel.content.widgets.filter(c => c.model.type === 'code'
            && (c.model.outputs.length > 0 || c.model.executionCount !== null)).length;
        if (left === 0) window.jupyterapp.commands.execute('notebook:run-all-cells');
        return left;
    });""")

# Done: the kernel is idle, no prompt shows [*], and every code cell has an execution count
# (or a cell failed: then the Lab runs no further, and the caller reports the error).
JS_DONE = js("""
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    if (!kernel || kernel.status !== 'idle') return false;
    if (Array.from(panel.node.querySelectorAll('.jp-InputPrompt')).some(p => p.textContent.includes('[*]'))) return false;
    const code = panel.content.widgets.filter(c => c.model.type === 'code');
    const failed = code.some(c => Array.from({length: c.model.outputs.length}, (_, i) => c.model.outputs.get(i))
                                      .some(o => o.type === 'error'));
    return failed || code.every(c => c.model.executionCount !== null);""")

JS_STATE = js("""
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    return {kernel: kernel ? kernel.status : null,
            busy: Array.from(panel.node.querySelectorAll('.jp-InputPrompt')).map(p => p.textContent.trim())
                       .filter(t => t.includes('*')).length,
            unrun: panel.content.widgets.filter(c => c.model.type === 'code' && c.model.executionCount === null).length};""")

JS_CELLS = js("return panel.content.widgets.map(c => c.model.toJSON());")

JS_IMAGES = js("""return Array.from(panel.node.querySelectorAll('.jp-RenderedImage img'))
    .map(i => ({complete: i.complete, width: i.naturalWidth, height: i.naturalHeight}));""")

JS_TRACEBACKS = js("""return Array.from(panel.node.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
    .map(o => o.textContent).filter(t => t.includes('Traceback'));""")

JS_KERNEL_IDLE = js("""const k = panel.sessionContext.session && panel.sessionContext.session.kernel;
    return !!k && k.status === 'idle';""")

# The bytes behind an <img> (ipywidgets' Image shows a blob: URL), base64-encoded.
JS_IMG_BYTES = """async (img) => {
    const r = await fetch(img.src);
    const b = new Uint8Array(await r.arrayBuffer());
    let s = '';
    for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
    return btoa(s);
}"""


def image_digest(img_locator) -> tuple[str, str, int]:
    """(src, sha256 of the bytes, byte count) of an <img>; retried, since a widget that updates
    revokes its previous blob: URL."""
    last = None
    for _ in range(10):
        src = img_locator.get_attribute("src") or ""
        try:
            data = base64.b64decode(img_locator.evaluate(JS_IMG_BYTES))
        except Exception as e:  # the blob was revoked under us: read the new one
            last = e
            time.sleep(0.2)
            continue
        if (img_locator.get_attribute("src") or "") == src:
            return src, hashlib.sha256(data).hexdigest(), len(data)
    raise AssertionError(f"could not read the widget image's bytes: {last}")


def output_dir() -> Path:
    """Where screenshots go: $MINILM_TEST_OUTPUT/browser, else test-output/browser at the project root."""
    base = os.environ.get("MINILM_TEST_OUTPUT", "").strip()
    out = (Path(base) if base else ROOT / "test-output") / "browser"
    out.mkdir(parents=True, exist_ok=True)
    return out


def committed_notebook(name: str) -> dict:
    return json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))


def stored_image_count(nb: dict) -> int:
    """The stored plots. Not an explorer's stored picture: in JupyterLab the live widget takes its place."""
    return sum("image/png" in o.get("data", {}) and WIDGET_VIEW not in o.get("data", {})
               for c in nb["cells"] for o in c.get("outputs", []))


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def cell_index(nb: dict, pattern: str) -> int:
    """Index (among all cells, as in the Lab's DOM) of the first code cell whose source matches."""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and re.search(pattern, "".join(cell["source"])):
            return i
    raise AssertionError(f"no code cell matches {pattern!r}")


class LabNotebook:
    """One notebook open in the Lab page: run it, read its cells and outputs, move its widgets."""

    def __init__(self, page, server: LabServer, name: str):
        self.page, self.server, self.name = page, server, name

    def open(self, timeout: float = 90.0) -> None:
        # ?reset: a fresh workspace, so that a notebook opened earlier on this server stays closed.
        self.page.goto(f"{self.server.url}/lab/tree/{self.name}?reset", wait_until="domcontentloaded")
        self.page.wait_for_function(JS_OPENED, arg=self.name, timeout=timeout * 1000, polling=250)
        # The file browser closed: the notebook gets the page's width in screenshots.
        self.page.evaluate("() => window.jupyterapp.shell.collapseLeft()")

    def state(self) -> dict:
        try:
            return self.page.evaluate(JS_STATE, self.name)
        except Exception as e:
            return {"unreadable": str(e)}

    def run_all(self, timeout: float = 150.0) -> None:
        """Clear every output, run all cells, and wait until the kernel is idle with every code
        cell run and no [*] prompt left."""
        left = self.page.evaluate(JS_RUN_ALL, self.name)
        assert left == 0, f"{self.name}: clearing all outputs left {left} code cells with outputs or counts"
        try:
            self.page.wait_for_function(JS_DONE, arg=self.name, timeout=timeout * 1000, polling=250)
        except Exception as e:
            raise AssertionError(f"{self.name}: cells still running or unrun after {timeout:.0f} s: "
                                 f"{self.state()}") from e

    def cells(self) -> list[dict]:
        """Every cell as nbformat JSON, from the Lab's notebook model (what a save would write)."""
        return self.page.evaluate(JS_CELLS, self.name)

    def problems(self) -> list[str]:
        """Error outputs, and stderr with a traceback, in the model or on the page."""
        found = []
        for i, cell in enumerate(self.cells()):
            for out in cell.get("outputs", []):
                if out["output_type"] == "error":
                    found.append(f"cell {i}: {out['ename']}: {out['evalue']}")
                elif out["output_type"] == "stream" and out.get("name") == "stderr" and "Traceback" in output_text(out):
                    found.append(f"cell {i}: stderr: {output_text(out)[-500:]}")
        found += [f"on the page: {t[-500:]}" for t in self.page.evaluate(JS_TRACEBACKS, self.name)]
        return found

    def cell(self, index: int):
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def rendered_images(self, at_least: int, timeout: float = 30.0) -> list[dict]:
        """The images in the notebook's image outputs, once at least `at_least` have loaded."""
        deadline = time.monotonic() + timeout
        while True:
            images = self.page.evaluate(JS_IMAGES, self.name)
            if (len(images) >= at_least and all(i["complete"] for i in images)) or time.monotonic() > deadline:
                return images
            time.sleep(0.25)

    def screenshot_whole(self, path: Path, width: int = 1400, max_height: int = 16000) -> None:
        """The whole notebook in one picture: the viewport stretched to the notebook's height."""
        page, size = self.page, self.page.viewport_size
        heights = page.evaluate("""() => { const o = document.querySelector(
                '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
            return o ? [o.scrollHeight, o.clientHeight] : null; }""")
        if heights is None:
            page.screenshot(path=str(path))
            return
        page.set_viewport_size({"width": width, "height": min(size["height"] + heights[0] - heights[1], max_height)})
        try:
            page.wait_for_function("""() => { const o = document.querySelector(
                    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
                o.scrollTop = 0; return o.scrollHeight <= o.clientHeight + 2; }""", timeout=5000, polling=100)
        except Exception:
            pass  # taller than max_height: the top of it
        page.screenshot(path=str(path))
        page.set_viewport_size(size)

    def screenshot_element(self, locator, path: Path, margin: int = 200) -> None:
        """A screenshot of one element (a cell), the viewport made taller first if it does not fit."""
        page, size = self.page, self.page.viewport_size
        height = locator.evaluate("e => Math.ceil(e.getBoundingClientRect().height)")
        if height + margin > size["height"]:
            page.set_viewport_size({"width": size["width"], "height": height + 2 * margin})
        try:
            locator.scroll_into_view_if_needed()
            locator.screenshot(path=str(path))
        finally:
            page.set_viewport_size(size)

    def kernel_idle(self) -> bool:
        return self.page.evaluate(JS_KERNEL_IDLE, self.name)

    def move_slider(self, cell, label: str, presses: int, timeout: float = 30.0) -> tuple[str, str]:
        """Focus the ipywidgets slider described `label` in `cell`, press ArrowRight `presses`
        times, and wait until its readout moved that far and the kernel is done redrawing.
        Returns the readout before and after."""
        slider = cell.locator(".widget-slider").filter(
            has=self.page.locator("label.widget-label", has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")))
        assert slider.count() == 1, f"{self.name}: {slider.count()} sliders labelled {label!r}"
        readout = slider.locator(".widget-readout")
        before = readout.inner_text().strip()
        handle = slider.locator(".noUi-handle")
        handle.focus()
        for _ in range(presses):
            handle.press("ArrowRight")
        want = str(int(before) + presses)
        deadline = time.monotonic() + timeout
        while readout.inner_text().strip() != want:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: slider {label!r} shows {readout.inner_text()!r} after "
                                     f"{presses} × ArrowRight from {before}, not {want}")
            time.sleep(0.1)
        return before, want

    def wait_for_new_image(self, img, old_src: str, timeout: float = 30.0, settle: float = 1.0) -> None:
        """Wait until the widget <img> shows a new picture, the kernel is idle, and the picture has
        not changed for `settle` seconds (one update per key press may still be on its way)."""
        deadline, last, since = time.monotonic() + timeout, None, time.monotonic()
        while time.monotonic() < deadline:
            src = img.get_attribute("src")
            if src != last:
                last, since = src, time.monotonic()
            elif src != old_src and self.kernel_idle() and time.monotonic() - since >= settle:
                return
            time.sleep(0.1)
        raise AssertionError(f"{self.name}: the widget image did not change within {timeout:.0f} s "
                             f"(src {'changed' if last != old_src else 'unchanged'}; {self.state()})")


def output_text(out: dict) -> str:
    text = out.get("text", "")
    return "".join(text) if isinstance(text, list) else text
