"""The course in a real browser: JupyterLab in headless Chromium, driven by Playwright.

For notebooks 05 (RoPE) and 06 (attention), against the reference: open the notebook in the
Lab, run all cells, and check that every plot rendered as an image, that no cell shows an error,
and that moving a slider of the explorer widget redraws its picture. Against the stubs in
minilm/: notebook 05's first check cell shows the task's not-implemented line.

Needs the playwright package and a Chromium (/usr/bin/chromium, or MINILM_CHROMIUM=/path), which
.ci/run installs on CI; elsewhere, without them, it skips with one line saying what to install. Screenshots go to
test-output/browser/ (or
$MINILM_TEST_OUTPUT/browser/). Deselect with `-m "not browser"`.
"""

from __future__ import annotations

import contextlib
import os

import pytest
from browser_helpers import (
    CHROMIUM_ARGS,
    ROOT,
    LabNotebook,
    LabServer,
    Unavailable,
    cell_index,
    committed_notebook,
    ensure_browser,
    image_digest,
    output_dir,
    output_text,
    skip_reason,
    stored_image_count,
)

from minilm.course import checks, tasks

pytestmark = pytest.mark.browser

if skip_reason():  # nothing to run it with: one line for the whole module
    pytest.skip(skip_reason(), allow_module_level=True)

VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def chromium() -> str:
    try:
        return ensure_browser()
    except Unavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def browser(chromium, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    # Chromium's own files (crash reports, dconf) in a temporary home, not the user's ~/.config and ~/.cache.
    home = tmp_path_factory.mktemp("chromium-home")
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache")}
    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS, env=env,
                                     timeout=60_000)
    except Exception as e:
        pw.stop()
        pytest.fail(f"Chromium at {chromium} did not start: {str(e).splitlines()[0]}", pytrace=False)
    yield browser
    browser.close()
    pw.stop()


def _lab(tmp_path_factory, impl: str | None):
    server = LabServer(tmp_path_factory.mktemp(f"lab-{impl or 'stubs'}"), impl)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def reference_lab(chromium, tmp_path_factory):
    """JupyterLab whose kernels run the reference (MINILM_IMPL=solutions)."""
    if not (ROOT / "solutions").is_dir():
        pytest.skip("browser test of the reference skipped: no solutions/ in this checkout")
    yield from _lab(tmp_path_factory, "solutions")


@pytest.fixture(scope="module")
def stub_lab(chromium, tmp_path_factory):
    """JupyterLab whose kernels run minilm/ as it is (no MINILM_IMPL, whatever pytest's --impl)."""
    yield from _lab(tmp_path_factory, None)


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    context.close()


@contextlib.contextmanager
def explained(nb: LabNotebook, name: str):
    """On failure: a screenshot of the page (at the first error output, if any), and the page's
    errors and the Jupyter server's log in the message. Either way, the kernel is shut down after."""
    page, server = nb.page, nb.server
    shot = output_dir() / f"{name}-failure.png"
    shot.unlink(missing_ok=True)  # from an earlier run
    try:
        yield
    except Exception as e:
        try:
            with contextlib.suppress(Exception):
                page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').first \
                    .scroll_into_view_if_needed(timeout=2000)
            page.screenshot(path=str(shot))
        except Exception as shot_error:
            shot = f"(none: {str(shot_error).splitlines()[0]})"
        errors = "\n".join(page.errors[-10:]) or "(none)"
        raise AssertionError(f"{type(e).__name__}: {e}\n--- screenshot: {shot}\n--- page errors:\n{errors}\n"
                             f"--- jupyter server log (tail):\n{server.log_tail()}") from e
    finally:
        server.shutdown_kernels()


def run_and_check_plots(nb: LabNotebook, shot_name: str) -> list[dict]:
    """Run all cells; every stored plot is there again as a loaded image, and nothing failed."""
    stored = committed_notebook(nb.name)
    nb.open()
    nb.run_all()
    assert not nb.problems(), f"{nb.name}: cells failed:\n" + "\n".join(nb.problems())
    cells = nb.cells()
    fresh = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
    want = stored_image_count(stored)
    assert fresh >= want, f"{nb.name}: {fresh} image outputs after running, the committed notebook has {want}"
    images = nb.rendered_images(at_least=want)
    assert len(images) >= want, f"{nb.name}: {len(images)} rendered images on the page, want ≥ {want}: {images}"
    empty = [i for i in images if not (i["complete"] and i["width"] > 0 and i["height"] > 0)]
    assert not empty, f"{nb.name}: images that did not load or have no size: {empty}"
    nb.screenshot_whole(output_dir() / f"{shot_name}-plots.png")
    return cells


def move_explorer(nb: LabNotebook, source_pattern: str, label: str, presses: int, shot_name: str) -> None:
    """Move one slider of the explorer widget shown by the cell matching source_pattern; its
    picture must change (new image, different bytes)."""
    index = cell_index(committed_notebook(nb.name), source_pattern)
    cell = nb.cell(index)
    img = cell.locator("img.widget-image")
    img.wait_for(state="visible")
    nb.page.wait_for_function("(i) => i.complete && i.naturalWidth > 0", arg=img.element_handle(), polling=100)
    cell.scroll_into_view_if_needed()
    src, digest, size = image_digest(img)
    assert size > 0, f"{nb.name}: the explorer's image is empty"
    nb.screenshot_element(cell, output_dir() / f"{shot_name}-explorer-before.png")
    before, after = nb.move_slider(cell, label, presses)
    nb.wait_for_new_image(img, src)
    new_src, new_digest, new_size = image_digest(img)
    assert new_digest != digest, (f"{nb.name}: slider {label!r} moved {before} → {after}, but the explorer's "
                                  f"picture has the same bytes ({new_size} bytes)")
    nb.screenshot_element(cell, output_dir() / f"{shot_name}-explorer-after.png")


def test_rope_notebook_plots_and_explorer(page, reference_lab):
    nb = LabNotebook(page, reference_lab, "05_rope.ipynb")
    with explained(nb, "05_rope"):
        run_and_check_plots(nb, "05_rope")
        move_explorer(nb, r"rope_explorer\(", "position p", 3, "05_rope")


def test_attention_notebook_plots_and_explorer(page, reference_lab):
    nb = LabNotebook(page, reference_lab, "06_attention.ipynb")
    with explained(nb, "06_attention"):
        run_and_check_plots(nb, "06_attention")
        move_explorer(nb, r"attention_explorer\(", "head", 2, "06_attention")


@pytest.fixture
def todo_line() -> str:
    """Task 5.1's not-implemented line as its check cell prints it, from the task registry: the
    check calls rope_angles first, the first of the task's names in the file; skips (before any
    server starts) when minilm/rope.py no longer holds that stub."""
    task = tasks.get("5.1")
    todo = task.todo_message("rope_angles")
    if f'NotImplementedError("{todo}' not in (ROOT / task.file).read_text(encoding="utf-8"):
        pytest.skip(f"stub-mode browser test skipped: task {task.id} is already written in {task.file}")
    return f"{checks.SYMBOL[checks.TODO]} {todo}"


def test_rope_notebook_with_stubs_shows_the_todo_line(todo_line, page, stub_lab):
    nb = LabNotebook(page, stub_lab, "05_rope.ipynb")
    index = cell_index(committed_notebook(nb.name), r'^check\("5\.1"\)')
    with explained(nb, "05_rope-stubs"):
        nb.open()
        nb.run_all()
        assert not nb.problems(), f"{nb.name} with stubs: cells failed:\n" + "\n".join(nb.problems())
        outputs = nb.cells()[index].get("outputs", [])
        assert [output_text(o) for o in outputs] == [todo_line + "\n"], f"cell {index} printed {outputs}"
        shown = nb.cell(index).locator(".jp-OutputArea-output").get_by_text(todo_line)
        shown.scroll_into_view_if_needed()
        assert shown.is_visible(), f"{todo_line!r} is not visible in cell {index}'s output"
        nb.page.screenshot(path=str(output_dir() / "05_rope-stubs-check.png"))
