"""`minilm site` (solutions/site.py): the course as a static website (Sphinx, MyST-NB, sphinx-book-theme), built
once for the module (its module-scoped fixture keeps the module on one worker) and read two ways. On disk: every
page is there in course order, every link and image inside the site resolves, nothing is loaded from another
site, the notebooks show what students see (the explorers' pictures with their note, no install cell, no
harness comments, the launch links and the .ipynb download), and task pages show their contract as text. In
headless Chromium over a local web server: every page loads without a console error, a failed request or a
request to another host, with its math typeset and its images loaded; a 390 px phone never scrolls sideways
and keeps plots readable; search finds a word; anchors land below the sticky bar; prose runs about 80
characters a line; dark mode follows the system. Then the refusals (a missing builder, a notebook without
stored outputs, a folder that is no site) and the swap that keeps an earlier site.
Screenshots go to test-output/site/ (or $MINILM_TEST_OUTPUT/site/)."""

from __future__ import annotations

import functools
import html
import http.server
import os
import re
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from minilm.course import tasks
from minilm.course.tasks import ROOT
from solutions import launch, site

sys.path.insert(0, str(ROOT / "tests"))
import browser_helpers  # noqa: E402  (tests/ is no package: the JupyterLab test's helpers)

EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)
BROWSER = pytest.mark.skipif(bool(browser_helpers.skip_reason()), reason=browser_helpers.skip_reason() or "")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    try:
        site.requirements()
    except site.SiteError as e:
        pytest.skip(str(e))
    out = tmp_path_factory.mktemp("site") / "site"
    started = time.monotonic()
    result = site.build(out)
    print(f"\nsite built in {time.monotonic() - started:.1f} s ({len(result.pages)} pages)")
    assert not result.warnings, "Sphinx warned:\n" + "\n".join(result.warnings[:20])
    return out


def pages(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html")
                  if not {"_static", "_sources"} & set(p.parts))


def read(root: Path, page: str) -> str:
    return (root / page).read_text(encoding="utf-8")


def test_every_page_is_there_in_course_order(built):
    found = pages(built)
    want = {"index.html", "tasks/index.html", "src/index.html", "docs/students.html", "search.html", "genindex.html"}
    want |= {site.notebook_page(p.name) for p in site.notebook_paths()}
    want |= {site.task_page(t) for t in tasks.TASKS} | {site.source_page(t.file) for t in tasks.TASKS}
    assert set(found) == want
    # Following "next" from the home page visits every notebook, each followed by its tasks, in the registry's
    # order; and the sidebar lists them in that order.
    order, page = [], "index.html"
    while m := re.search(r'<a class="right-next"\s+href="([^"]+)"', read(built, page)):
        page = os.path.normpath(os.path.join(os.path.dirname(page), m.group(1)))
        order.append(page)
    expected = []
    for path in site.notebook_paths():
        expected.append(site.notebook_page(path.name))
        expected += [site.task_page(t) for t in tasks.for_notebook(path.stem)]
    assert [p for p in order if p.startswith(("notebooks/", "tasks/")) and p != "tasks/index.html"] == expected
    sidebar = read(built, "index.html").split('bd-docs-nav', 1)[1].split("</nav>", 1)[0]
    listed = [p for p in re.findall(r'href="([^"#]+)"', sidebar) if p.startswith(("notebooks/", "tasks/"))]
    assert [p for p in listed if p != "tasks/index.html"] == expected
    assert (built / site.MARKER).is_file()
    for page in found:  # no reStructuredText or MyST error printed into a page
        assert 'class="system-message' not in read(built, page), page


def test_every_link_and_image_inside_the_site_resolves(built):
    broken = []
    for page in pages(built):
        text = read(built, page)
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
    # Nothing is loaded from elsewhere: only links (to the repository, Colab, Binder) leave the site.
    loads = re.compile(r'<(?:script|img|link|iframe)\b[^>]*(?:src|href)="(?:https?:)?//')
    for page in pages(built):
        assert not loads.findall(read(built, page)), page
    for css in (built / "_static").rglob("*.css"):
        assert not re.findall(r"url\(\s*['\"]?(?:https?:)?//", css.read_text(encoding="utf-8")), css
    owner, name = launch.repository()
    stub = read(built, site.task_page(tasks.get("3.1")))
    assert "../src/minilm/rmsnorm.py.html" in stub and f"github.com/{owner}/{name}/blob/" in stub
    home = read(built, "index.html")  # the README's links: its doc and the first notebook, as pages
    assert 'href="docs/students.html' in home and 'href="notebooks/00_welcome.html"' in home


def test_notebook_pages_show_what_students_see(built):
    for stem in ("05_rope", "06_attention"):  # the explorers: their stored picture, then the note
        text = read(built, f"notebooks/{stem}.html")
        assert site.WIDGET_NOTE in text and "VBox(children" not in text, stem
        before = text[:text.index(site.WIDGET_NOTE)]
        assert before.rfind("<img ") > before.rfind('class="cell_input'), f"{stem}: no picture before the note"
        # at its display size, half its pixels (viz/picture.py), not stretched
        img = before[before.rfind("<img "):]
        assert re.match(r'<img [^>]*\bwidth="?\d+', img), f"{stem}: the explorer's picture has no width"
    for path in site.notebook_paths():
        page = site.notebook_page(path.name)
        text = read(built, page)
        nb_path = f"notebooks/{path.name}"
        # The launch cell: plain links to Colab and Binder (no badge images), and the .ipynb to download,
        # which is the student edition's notebook as it is.
        assert f'href="{html.escape(launch.colab_url(nb_path))}"' in text, page
        assert f'href="{html.escape(launch.binder_url(nb_path))}"' in text, page
        assert "colab-badge.svg" not in text and "badge_logo.svg" not in text, page
        assert f'href="../{site.download(nb_path)}" download' in text, page
        assert (built / site.download(nb_path)).read_bytes() == path.read_bytes(), page
        # The install cell is out; so are the comments that speak to the test harness, and nothing else.
        [install] = [c.source for c in nbformat.read(path, as_version=4).cells
                     if c.cell_type == "code" and launch.TAG in c.metadata.get("tags", [])]
        assert html.escape(install.splitlines()[0], quote=False) not in text, page
        assert "NBVAL_" not in text and "# release:" not in text, page
    modern = read(built, "notebooks/14_modern_recipe.html")
    assert "results" in modern and "limited" in modern and "ablation" in modern  # NBVAL_SKIP's cells still shown


def test_task_pages_show_their_contract_as_text(built):
    from minilm.course import hints

    for task in tasks.TASKS:
        text = read(built, site.task_page(task))
        # No token Pygments could not read (its red error boxes), in a task page or anywhere else.
        assert 'class="err"' not in text, task.id
        contract = text.split('id="the-contract"', 1)[1].split('id="the-from-scratch-rule"', 1)[0]
        assert 'class="highlight-python' in contract and "minilm-docstring" in contract, task.id
        first_line = hints.contract(task).splitlines()[1].strip()  # its first header line, as Pygments spells it
        assert html.escape(first_line.split("(")[0], quote=False) in re.sub(r"<[^>]+>", "", contract), task.id
    for page in pages(built):
        assert 'class="err"' not in read(built, page), page


# ---------------------------------------------------------------- in Chromium


class Browser:
    """One Chromium, one local web server on the site; pages note what went wrong, and every request to
    another host is refused and noted."""

    def __init__(self, root: Path, shots: Path, home: Path):
        from playwright.sync_api import sync_playwright

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.shots, self.problems = shots, []
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
               "XDG_CACHE_HOME": str(home / ".cache")}
        self.pw = sync_playwright().start()
        self.browser = self.pw.chromium.launch(executable_path=browser_helpers.ensure_browser(), headless=True,
                                               args=browser_helpers.CHROMIUM_ARGS, env=env, timeout=60_000)

    def page(self, width: int = 1400, height: int = 900, dark: bool = False):
        context = self.browser.new_context(viewport={"width": width, "height": height},
                                           color_scheme="dark" if dark else "light")

        def route(r):
            if r.request.url.startswith(self.base):
                r.continue_()
            else:
                self.problems.append(f"request to another host: {r.request.url}")
                r.abort()

        context.route("**/*", route)
        self.problems = []  # each test's own
        page = context.new_page()
        page.on("console", lambda m: m.type == "error" and self.problems.append(f"{page.url}: console: {m.text}"))
        page.on("pageerror", lambda e: self.problems.append(f"{page.url}: {e}"))
        # (ERR_ABORTED: a request that the next navigation cancelled, or one refused above)
        page.on("requestfailed", lambda r: r.url.startswith(self.base) and "ERR_ABORTED" not in (r.failure or "")
                and self.problems.append(f"{page.url}: failed {r.url} ({r.failure})"))
        page.on("response", lambda r: r.status >= 400 and self.problems.append(f"{page.url}: {r.status} {r.url}"))
        return page

    def open(self, page, name: str) -> dict:
        page.goto(self.base + name, wait_until="load")
        return page.evaluate("""async () => {
            const math = [...document.querySelectorAll('span.math, div.math')];
            if (math.length && window.MathJax && MathJax.startup) await MathJax.startup.promise;
            return {math: math.length, typeset: math.filter(m => m.querySelector('mjx-container')).length,
                    errors: document.querySelectorAll('mjx-merror').length,
                    mathjax: !!(window.MathJax && MathJax.startup),
                    images: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0))
                                                .map(i => i.currentSrc.slice(0, 80)),
                    sideways: document.documentElement.scrollWidth - document.documentElement.clientWidth};
        }""")

    def shot(self, page, name: str, full: bool = False) -> None:
        page.wait_for_timeout(400)  # the theme's icons and colour transitions settle after load
        page.screenshot(path=str(self.shots / f"{name}.png"), full_page=full)

    def close(self) -> None:
        try:
            self.browser.close()
        finally:
            self.pw.stop()
            self.server.shutdown()


@pytest.fixture(scope="module")
def chromium(built, tmp_path_factory):
    shots = Path(os.environ.get("MINILM_TEST_OUTPUT", "").strip() or ROOT / "test-output") / "site"
    shots.mkdir(parents=True, exist_ok=True)
    b = Browser(built, shots, tmp_path_factory.mktemp("chromium-home"))
    yield b
    b.close()


@pytest.mark.browser
@BROWSER
def test_every_page_loads_in_chromium_with_math_images_and_nothing_from_elsewhere(built, chromium):
    page = chromium.page()
    for name in pages(built):
        got = chromium.open(page, name)
        assert not got["math"] or got["mathjax"], f"{name}: MathJax did not load"
        assert got["typeset"] == got["math"] and got["errors"] == 0, f"{name}: math left untypeset: {got}"
        assert not got["images"], f"{name}: images that did not load: {got['images']}"
        if name.startswith("notebooks/"):
            source = nbformat.read(ROOT / "notebooks" / (Path(name).stem + ".ipynb"), as_version=4)
            if any("$" in c.source for c in source.cells if c.cell_type == "markdown"):
                assert got["typeset"] > 0, f"{name}: its math was not typeset"
    for name, shot in (("index.html", "home"), ("notebooks/03_rmsnorm.html", "notebook"),
                       ("tasks/3.1.html", "task"), ("notebooks/06_attention.html", "explorer")):
        chromium.open(page, name)
        chromium.shot(page, f"{shot}-1400")
    assert not chromium.problems, "\n".join(chromium.problems[:20])


@pytest.mark.browser
@BROWSER
def test_a_phone_never_scrolls_sideways_and_keeps_plots_readable(built, chromium):
    page = chromium.page(width=390, height=844)
    for name, shot in (("index.html", "home"), ("notebooks/06_attention.html", "notebook"),
                       ("tasks/index.html", "tasks"), ("tasks/7.1.html", "task"), ("search.html?q=RMSNorm", "search")):
        got = chromium.open(page, name)
        assert got["sideways"] <= 0, f"{name} scrolls sideways by {got['sideways']} px at 390 px"
        chromium.shot(page, f"{shot}-390")
    # A wide plot keeps up to twice the screen's width (scrolling in its own box), not a third of its size.
    chromium.open(page, "notebooks/06_attention.html")
    sizes = page.evaluate("""[...document.querySelectorAll('div.cell_output > img')].map(i =>
        [i.getBoundingClientRect().width, i.naturalWidth, i.parentElement.clientWidth])""")
    assert sizes and all(w >= min(natural, 2 * box) - 2 for w, natural, box in sizes), sizes
    assert not chromium.problems, "\n".join(chromium.problems[:20])


@pytest.mark.browser
@BROWSER
def test_search_finds_a_word(built, chromium):
    page = chromium.page()
    page.goto(chromium.base + "search.html?q=RMSNorm", wait_until="load")
    page.wait_for_function("document.querySelectorAll('#search-results li').length > 0", timeout=30_000)
    found = page.evaluate("[...document.querySelectorAll('#search-results li a')].map(a => a.getAttribute('href'))")
    assert any("notebooks/03_rmsnorm.html" in f for f in found), found
    page.wait_for_function("document.querySelectorAll('#search-results li p.context').length > 0", timeout=30_000)
    quoted = page.evaluate("document.querySelector('#search-results li p.context').textContent")
    assert "RMSNorm" in quoted and "System Settings" not in quoted, quoted  # the article's words, not the buttons'
    chromium.shot(page, "search-1400")
    assert not chromium.problems, "\n".join(chromium.problems[:20])


@pytest.mark.browser
@BROWSER
def test_anchors_land_below_the_sticky_bar_and_prose_runs_about_80_characters(built, chromium):
    page = chromium.page()
    page.goto(chromium.base + "notebooks/03_rmsnorm.html#why-compute-in-float32", wait_until="load")
    page.wait_for_timeout(300)
    top, bar = page.evaluate("""[document.querySelector('#why-compute-in-float32 > h2').getBoundingClientRect().top,
                                 document.querySelector('.bd-header-article').getBoundingClientRect().bottom]""")
    assert bar <= top < 300, f"the heading's top {top} px, the sticky bar's bottom {bar} px"
    chromium.open(page, "notebooks/03_rmsnorm.html")
    per_line = page.evaluate("""() => {
        const p = [...document.querySelectorAll('article p')].find(p => p.textContent.length > 400);
        const style = getComputedStyle(p), ctx = document.createElement('canvas').getContext('2d');
        ctx.font = `${style.fontSize} ${style.fontFamily}`;
        const text = p.textContent.replace(/\\s+/g, ' ');
        return p.clientWidth / (ctx.measureText(text).width / text.length);
    }""")
    assert 65 <= per_line <= 90, f"{per_line:.0f} characters a line"
    assert not chromium.problems, "\n".join(chromium.problems[:20])


@pytest.mark.browser
@BROWSER
def test_dark_mode_follows_the_system(built, chromium):
    page = chromium.page(dark=True)
    chromium.open(page, "notebooks/05_rope.html")
    theme, background = page.evaluate("""[document.documentElement.dataset.theme,
                                          getComputedStyle(document.body).backgroundColor]""")
    rgb = [int(v) for v in re.findall(r"\d+", background)[:3]]
    assert theme == "dark" and max(rgb) < 80, (theme, background)
    chromium.shot(page, "dark-1400")
    problems = chromium.problems
    page = chromium.page(width=390, height=844, dark=True)
    chromium.open(page, "notebooks/05_rope.html")
    chromium.shot(page, "dark-390")
    chromium.problems += problems
    assert not chromium.problems, "\n".join(chromium.problems[:20])


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
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # import myst_nb: ImportError
    assert site.main([str(out)]) == 2
    err = capsys.readouterr().err
    assert "myst-nb" in err and "pip install" in err and err.count("\n") == 1, err
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

    def broken(*args):
        raise site.SiteError("Sphinx failed: the builder broke")

    monkeypatch.setattr(site, "run_sphinx", broken)
    with pytest.raises(site.SiteError):
        site.build(out)
    _untouched(out)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(site.SiteError, match="is not a site built by `minilm site`"):
        site.build(mine)
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "mine"
