"""`minilm site` (solutions/site.py): the course as a static website, built once for the module and visited
in headless Chromium over a local web server: every page loads without a console error or a failed request,
math is typeset, every image loads, and every link inside the site resolves; then the refusals (a missing
builder, a notebook without stored outputs, a folder that is no site) and the swap that keeps an earlier site.
Screenshots go to test-output/site/ (or $MINILM_TEST_OUTPUT/site/)."""

from __future__ import annotations

import functools
import html
import http.server
import os
import re
import sys
import threading
from pathlib import Path

import nbformat
import pytest

from minilm.course import tasks
from minilm.course.tasks import ROOT
from solutions import launch, site

sys.path.insert(0, str(ROOT / "tests"))
import browser_helpers  # noqa: E402  (tests/ is no package: the JupyterLab test's helpers)

EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    try:
        site.requirements()
    except site.SiteError as e:
        pytest.skip(str(e))
    out = tmp_path_factory.mktemp("site") / "site"
    site.build(out)
    return out


def pages(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html") if "_static" not in p.parts)


def test_every_page_is_there_in_course_order(built):
    found = pages(built)
    want = {"index.html", "tasks/index.html", "docs/students.html"}
    want |= {site.notebook_page(f"notebooks/{p.name}") for p in site.notebook_paths()}
    want |= {site.task_page(t) for t in tasks.TASKS} | {site.source_page(t.file) for t in tasks.TASKS}
    assert set(found) == want
    # Following "next" from the home page visits every notebook and task in the registry's order.
    order, page = [], "index.html"
    while m := re.search(r'<a rel="next" href="([^"]+)"', (built / page).read_text(encoding="utf-8")):
        page = os.path.normpath(os.path.join(os.path.dirname(page), m.group(1)))
        order.append(page)
    taught = [p for p in order if p.startswith(("notebooks/", "tasks/")) and p != "tasks/index.html"]
    expected = []
    for path in site.notebook_paths():
        expected.append(site.notebook_page(f"notebooks/{path.name}"))
        expected += [site.task_page(t) for t in tasks.for_notebook(path.stem)]
    assert taught == expected
    assert (built / site.MARKER).is_file()


def test_every_link_and_image_inside_the_site_resolves(built):
    broken = []
    for page in pages(built):
        text = (built / page).read_text(encoding="utf-8")
        for target in re.findall(r'(?:href|src)="([^"]+)"', text):
            target = html.unescape(target)
            if EXTERNAL.match(target):
                continue
            file, _, anchor = target.partition("#")
            file = file.partition("?")[0]
            path = (built / page).parent / file if file else built / page
            if not path.resolve().is_file():
                broken.append(f"{page}: {target}")
            elif anchor and path.suffix == ".html" and f'id="{anchor}"' not in path.read_text(encoding="utf-8"):
                broken.append(f"{page}: {target} (no such anchor)")
    assert not broken, "\n".join(broken[:20])
    # Nothing is fetched from elsewhere: only links (to the repository, Colab, Binder) leave the site.
    for page in pages(built):
        text = (built / page).read_text(encoding="utf-8")
        assert not re.findall(r'<(?:script|img|link)\b[^>]*(?:src|href)="(?:https?:)?//', text), page
    owner, name = launch.repository()
    stub = (built / site.task_page(tasks.get("3.1"))).read_text(encoding="utf-8")
    assert "../src/minilm/rmsnorm.py.html" in stub and f"github.com/{owner}/{name}/blob/" in stub


def test_the_explorers_show_their_picture_and_say_they_are_interactive(built):
    for stem in ("05_rope", "06_attention"):
        text = (built / "notebooks" / f"{stem}.html").read_text(encoding="utf-8")
        assert site.WIDGET_NOTE in text and "VBox(children" not in text, stem
        before = text[:text.index(site.WIDGET_NOTE)]
        assert before.rfind('src="data:image/png') > before.rfind("jp-InputPrompt"), f"{stem}: no picture"
    for path in site.notebook_paths():  # the install cell is left out, the badges are links
        text = (built / site.notebook_page(f"notebooks/{path.name}")).read_text(encoding="utf-8")
        assert "pip" not in text.split("Open in Colab")[1][:3000] and "colab-badge.svg" not in text


@pytest.mark.browser
@pytest.mark.skipif(bool(browser_helpers.skip_reason()), reason=browser_helpers.skip_reason() or "")
def test_every_page_loads_in_chromium_with_math_images_and_no_error(built, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(built)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    shots = Path(os.environ.get("MINILM_TEST_OUTPUT", "").strip() or ROOT / "test-output") / "site"
    shots.mkdir(parents=True, exist_ok=True)
    home = tmp_path_factory.mktemp("chromium-home")
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache")}
    problems = []
    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=browser_helpers.ensure_browser(), headless=True,
                                     args=browser_helpers.CHROMIUM_ARGS, env=env, timeout=60_000)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: m.type == "error" and problems.append(f"{page.url}: console: {m.text}"))
        page.on("pageerror", lambda e: problems.append(f"{page.url}: {e}"))
        page.on("requestfailed", lambda r: problems.append(f"{page.url}: failed {r.url}"))
        page.on("response", lambda r: r.status >= 400 and problems.append(f"{page.url}: {r.status} {r.url}"))
        for name in pages(built):
            page.goto(base + name, wait_until="load")
            math = page.evaluate("""async () => {
                if (!window.MathJax || !MathJax.startup) return null;
                await MathJax.startup.promise;
                return {typeset: document.querySelectorAll('mjx-container').length,
                        errors: document.querySelectorAll('mjx-merror').length};
            }""")
            images = page.evaluate("[...document.images].map(i => [i.currentSrc.slice(0, 60), i.complete "
                                   "&& i.naturalWidth > 0])")
            if name.startswith("notebooks/"):
                assert math is not None, f"{name}: MathJax did not load"
            assert not math or math["errors"] == 0, f"{name}: {math['errors']} formulas MathJax could not typeset"
            assert all(ok for _, ok in images), f"{name}: images that did not load: {images}"
            if name.startswith("notebooks/"):
                source = nbformat.read(ROOT / "notebooks" / (Path(name).stem + ".ipynb"), as_version=4)
                if any("$" in c.source for c in source.cells if c.cell_type == "markdown"):
                    assert math["typeset"] > 0, f"{name}: its math was not typeset"
                page.screenshot(path=str(shots / f"{Path(name).stem}.png"))
            elif name in ("index.html", "tasks/3.1.html", "src/minilm/rmsnorm.py.html", "docs/students.html"):
                page.screenshot(path=str(shots / (name.replace("/", "_").removesuffix(".html") + ".png")))
        browser.close()
    finally:
        pw.stop()
        server.shutdown()
    assert not problems, "\n".join(problems[:20])


# ---------------------------------------------------------------- refusals, and the swap


def _earlier_site(tmp_path: Path) -> Path:
    out = tmp_path / "out" / "site"
    out.mkdir(parents=True)
    (out / site.MARKER).write_text("", encoding="utf-8")
    (out / "index.html").write_text("the earlier site", encoding="utf-8")
    return out


def _untouched(out: Path) -> None:
    assert (out / "index.html").read_text(encoding="utf-8") == "the earlier site"
    assert [p.name for p in out.parent.iterdir()] == ["site"], "a half-built folder was left behind"


def test_a_missing_builder_is_named_with_the_command_to_install_it(tmp_path, monkeypatch, capsys):
    out = _earlier_site(tmp_path)
    monkeypatch.setitem(sys.modules, "mathjax", None)  # import mathjax: ImportError
    assert site.main([str(out)]) == 2
    err = capsys.readouterr().err
    assert "django-static-mathjax" in err and "pip install" in err and err.count("\n") == 1, err
    _untouched(out)


def test_a_notebook_without_stored_outputs_is_named_with_the_command_to_run(tmp_path, monkeypatch, capsys):
    out = _earlier_site(tmp_path)
    nb = nbformat.read(ROOT / "notebooks" / "01_linear.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    cleared = tmp_path / "notebooks" / "01_linear.ipynb"
    cleared.parent.mkdir()
    nbformat.write(nb, cleared)
    monkeypatch.setattr(site, "notebook_paths", lambda: [ROOT / "notebooks" / "00_welcome.ipynb", cleared])
    assert site.main([str(out)]) == 2
    err = capsys.readouterr().err
    assert "notebooks/01_linear.ipynb" in err and "minilm notebooks 01_linear" in err, err
    _untouched(out)


def test_a_failed_build_keeps_the_earlier_site_and_a_folder_that_is_no_site_is_refused(tmp_path, monkeypatch):
    out = _earlier_site(tmp_path)
    monkeypatch.setattr(site, "notebook_paths", lambda: [ROOT / "notebooks" / "00_welcome.ipynb"])

    def broken(*args):
        raise RuntimeError("the exporter broke")

    monkeypatch.setattr(site, "render_notebook", broken)
    with pytest.raises(RuntimeError):
        site.build(out)
    _untouched(out)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(site.SiteError, match="is not a site built by `minilm site`"):
        site.build(mine)
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "mine"
