"""`minilm site OUT`: the course as a static website, readable offline.

    minilm site site/            # build (or rebuild) the site in site/; open site/index.html through any web server

What students see, rendered: the student edition's README (the home page) and docs, every notebook with
its stored outputs (nbconvert's HTML exporter, JupyterLab's look), a page per task (its contract from the
stub, its from-scratch rule, what its check runs, the commands) linking the stub file's page, and each
stub file as a page; every page has the course's navigation, in course order (minilm/course/tasks.py).
Math is typeset by MathJax 3, copied from the `django-static-mathjax` package (MathJax's own files; no Django)
at build time, so neither the build nor the site needs a network. A widget output shows its stored picture
(solutions/notebooks.py keeps the PNG of the explorer) with a note that the notebook is interactive in
JupyterLab; the launch cells' badges become plain links (their images live on other sites) and the install
cell is left out.

The site is built in a temporary folder beside OUT and swapped in only when complete, so a failed build
leaves an earlier site as it was. OUT must be empty, absent, or a site this command built.
"""

from __future__ import annotations

import argparse
import copy
import html
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from minilm.course import tasks
from minilm.course.tasks import ROOT

MARKER = ".minilm-site"  # in every site this command builds: OUT may be replaced only when it holds one
STATIC = "_static"
MATHJAX_SCRIPT = "tex-chtml-full.js"  # MathJax 3: TeX in, HTML and CSS out, every TeX extension
# What the site copies of MathJax's es5/ folder: the one bundle, its fonts and the parts it loads on demand.
MATHJAX_PARTS = (MATHJAX_SCRIPT, "output", "input", "a11y", "ui", "adaptors")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ("A still picture of an interactive explorer: open this notebook in JupyterLab (or Colab, "
               "Binder) and run it to move its sliders.")
BADGE = re.compile(r"\[!\[([^\]]*)\]\([^)]*\)\]\(([^)]*)\)")  # [![alt](image)](target)


class SiteError(Exception):
    pass


# ---------------------------------------------------------------- what the site needs


def requirements() -> tuple[object, Path]:
    """nbconvert's HTML exporter and MathJax's folder, or SiteError saying what to install."""
    missing = []
    try:
        import nbconvert  # noqa: F401
    except ImportError:
        missing.append("nbconvert")
    try:
        import mathjax  # the django-static-mathjax package: MathJax 3's files, no Django needed
    except ImportError:
        missing.append("django-static-mathjax")
    if missing:
        raise SiteError(f"the site builder needs {' and '.join(missing)}, which are not installed: run "
                        f"`python -m pip install -e \".[dev]\"` (or `python -m pip install {' '.join(missing)}`)")
    folder = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (folder / MATHJAX_SCRIPT).is_file():
        raise SiteError(f"the `mathjax` package has no {MATHJAX_SCRIPT} in {folder} (another package of that name?): "
                        "`python -m pip install --force-reinstall django-static-mathjax`")
    from nbconvert import HTMLExporter

    return HTMLExporter, folder


def notebook_paths() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def unrun(path: Path) -> bool:
    """A notebook whose code cells store no output at all (never run, or cleared)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    return bool(code) and not any(c.get("outputs") for c in code)


# ---------------------------------------------------------------- pages and links


@dataclass(frozen=True)
class Page:
    path: str  # relative to the site, "notebooks/05_rope.html"
    title: str


def notebook_page(nb_path: str) -> str:
    return f"notebooks/{Path(nb_path).stem}.html"


def task_page(task: tasks.Task) -> str:
    return f"tasks/{task.id}.html"


def source_page(file: str) -> str:
    return f"src/{file}.html"


def _rel(frm: str, to: str) -> str:
    return os.path.relpath(to, os.path.dirname(frm) or ".").replace(os.sep, "/")


def repo_link(file: str) -> str:
    from solutions import launch

    return f"{launch.repository_url()}/blob/{launch.release_tag()}/{file}"


def rewrite_link(target: str, page: str, source_dir: str) -> str:
    """A Markdown link of a README or doc (relative to `source_dir`) as the site's link from `page`: a doc or
    notebook to its page, a stub file to its page, any other file of the repository to its address there."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target, flags=re.I) or target.startswith("#"):
        return target
    file, _, anchor = target.partition("#")
    path = os.path.normpath(os.path.join(source_dir, file)).replace(os.sep, "/")
    if path.endswith(".md"):
        to = "index.html" if path == "README.md" else f"{path[:-3]}.html"
    elif path.endswith(".ipynb") and path.startswith("notebooks/"):
        to = notebook_page(path)
    elif path in {t.file for t in tasks.TASKS}:
        to = source_page(path)
    else:
        return repo_link(path) + (f"#{anchor}" if anchor else "")
    return _rel(page, to) + (f"#{anchor}" if anchor else "")


def _markdown(text: str, page: str, source_dir: str) -> str:
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    text = BADGE.sub(lambda m: f"[{m.group(1)}]({m.group(2)})", text)
    body = markdown2html_mistune(text)
    def link(m):
        return f'href="{html.escape(rewrite_link(html.unescape(m.group(1)), page, source_dir))}"'

    def anchor(m):  # GitHub's heading anchors, so a doc's links to "#the-from-scratch-rules" resolve
        inner = re.sub(r'<a class="anchor-link"[^>]*>.*?</a>', "", m.group(2), flags=re.S)
        words = html.unescape(re.sub(r"<[^>]+>", "", inner)).strip().lower()
        slug = html.escape(re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", words)))
        return f'<h{m.group(1)} id="{slug}">{inner}<a class="anchor-link" href="#{slug}">¶</a></h{m.group(1)}>'

    body = re.sub(r"<h([1-6])(?: id=\"[^\"]*\")?>(.*?)</h\1>", anchor, body, flags=re.S)
    return re.sub(r'href="([^"]+)"', link, body)


# ---------------------------------------------------------------- the frame every page shares

CSS = """
body.minilm { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
nav.minilm-nav { position: sticky; top: 0; z-index: 10; background: #1f2933; color: #fff; padding: .5rem 1rem;
  display: flex; gap: 1.2rem; align-items: center; flex-wrap: wrap; font-size: 14px; }
nav.minilm-nav a { color: #fff; text-decoration: none; }
nav.minilm-nav a:hover { text-decoration: underline; }
nav.minilm-nav .brand { font-weight: 700; }
nav.minilm-nav .pager { margin-left: auto; display: flex; gap: 1rem; }
main.minilm-page { max-width: 960px; margin: 1.5rem auto 4rem; padding: 0 1rem; line-height: 1.55; }
main.minilm-page pre { background: #f5f7fa; padding: .8rem; overflow-x: auto; border-radius: 4px; }
main.minilm-page table { border-collapse: collapse; }
main.minilm-page td, main.minilm-page th { border: 1px solid #d0d7de; padding: .25rem .5rem; }
.minilm-widget-note { background: #fff8e1; border-left: 4px solid #f0b400; padding: .4rem .8rem; margin: .3rem 0;
  font-size: 13px; }
.minilm-launch a { display: inline-block; border: 1px solid #1f2933; border-radius: 4px; padding: .1rem .6rem;
  margin-right: .5rem; text-decoration: none; }
"""


def nav(page: str, pages: list[Page]) -> str:
    """The bar atop every page: home, notebooks, tasks, docs, and the previous and next pages in course order."""
    order = [p.path for p in pages]
    links = [f'<a class="brand" href="{_rel(page, "index.html")}">minilm</a>',
             f'<a href="{_rel(page, "index.html")}#notebooks">Notebooks</a>',
             f'<a href="{_rel(page, "tasks/index.html")}">Tasks</a>',
             f'<a href="{_rel(page, "docs/students.html")}">For students</a>']
    pager = []
    if page in order:
        i = order.index(page)
        if i > 0:
            pager.append(f'<a rel="prev" href="{_rel(page, order[i - 1])}">← {html.escape(pages[i - 1].title)}</a>')
        if i + 1 < len(order):
            pager.append(f'<a rel="next" href="{_rel(page, order[i + 1])}">{html.escape(pages[i + 1].title)} →</a>')
    return (f'<nav class="minilm-nav">{"".join(links)}<span class="pager">{"".join(pager)}</span></nav>')


def mathjax(page: str) -> str:
    here = _rel(page, f"{STATIC}/mathjax")
    return f"""<link rel="icon" href="data:,">
<script>
window.MathJax = {{tex: {{inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
                        processEscapes: true, processEnvironments: true, tags: "ams"}},
                  options: {{enableMenu: false}},
                  chtml: {{fontURL: "{here}/output/chtml/fonts/woff-v2"}}}};
</script>
<script src="{here}/{MATHJAX_SCRIPT}"></script>"""


def frame(page: str, title: str, body: str, pages: list[Page], math: bool = False) -> str:
    """A page of ours (not a notebook's) around `body`; MathJax only where `math` (a page with $…$ to typeset)."""
    css = _rel(page, f"{STATIC}/site.css")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} · minilm</title><link rel="stylesheet" href="{css}">
{mathjax(page) if math else '<link rel="icon" href="data:,">'}
</head><body class="minilm">{nav(page, pages)}<main class="minilm-page">{body}</main></body></html>
"""


# ---------------------------------------------------------------- notebooks


def prepare_notebook(nb):
    """A copy of a stored notebook as the site shows it: the install cell out, the badges as links, and each
    widget output as its stored picture with a note (or the note alone), never the widget's text repr."""
    from solutions import launch

    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        tagged = launch.TAG in cell.get("metadata", {}).get("tags", [])
        if tagged and cell.cell_type == "code":
            continue
        if tagged:
            cell.source = BADGE.sub(lambda m: f"[{m.group(1)}]({m.group(2)})", cell.source)
        outputs = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW in data:
                if "image/png" in data:
                    outputs.append({"output_type": "display_data", "metadata": {},
                                    "data": {"image/png": data["image/png"]}})
                out = {"output_type": "display_data", "metadata": {},
                       "data": {"text/html": f'<div class="minilm-widget-note">{WIDGET_NOTE}</div>'}}
            outputs.append(out)
        if cell.cell_type == "code":
            cell.outputs = outputs
        cells.append(cell)
    nb.cells = cells
    nb.metadata.pop("widgets", None)
    return nb


def render_notebook(exporter, path: Path, page: str, pages: list[Page]) -> str:
    """nbconvert's lab page of the notebook, with our navigation and local MathJax, and no script from elsewhere."""
    import nbformat

    nb = prepare_notebook(nbformat.read(path, as_version=4))
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem}})
    body = re.sub(r'(<a\b[^>]*href=")([^"]+)(")',  # the notebook's own links first, then our frame's
                  lambda m: m.group(1) + html.escape(rewrite_link(html.unescape(m.group(2)), page, "notebooks"))
                  + m.group(3), body)
    css = _rel(page, f"{STATIC}/site.css")
    body = body.replace("</head>", f'<link rel="stylesheet" href="{css}">\n{mathjax(page)}\n</head>', 1)
    return re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + nav(page, pages), body, count=1)


TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


def exporter(HTMLExporter):
    """nbconvert's lab HTML exporter without the scripts it fetches from the web (require.js, the widget
    manager, mermaid, MathJax: ours is local); its anchor links, prompts and JupyterLab CSS kept."""
    from jinja2 import DictLoader

    return HTMLExporter(extra_loaders=[DictLoader({"minilm_site.html.j2": TEMPLATE})],
                        template_file="minilm_site.html.j2")


# ---------------------------------------------------------------- task, source and index pages


def _code(source: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(source, PythonLexer(), HtmlFormatter(cssclass="highlight", nowrap=False))


def task_body(task: tasks.Task, page: str) -> str:
    from minilm.course import exercises, hints

    s = exercises.get(task.id)
    cases = "".join(f"<li>{html.escape(c['what'])}</li>" for c in s.cases())
    rule = "".join(f"<li>{html.escape(line.strip().removeprefix('- '))}</li>"
                   for line in hints.rule(task).splitlines()[1:]) or "<li>no built-in beyond the allowed list</li>"
    uses = ", ".join(f'<a href="{_rel(page, task_page(tasks.get(u)))}">Task {u}</a>' for u in task.uses)
    return f"""<h1>Task {task.id}: {html.escape(task.title)}</h1>
<p>You write <code>{'</code>, <code>'.join(task.names)}</code> in
<a href="{_rel(page, source_page(task.file))}"><code>{task.file}</code></a>
(<a href="{repo_link(task.file)}">on GitHub</a>), taught in
<a href="{_rel(page, notebook_page(task.notebook))}">{Path(task.notebook).stem}</a>. {task.points} points.
{f'It uses your code of {uses}.' if uses else ''}</p>
<h2>The contract</h2>
<p>The stub's signature, shape annotations and docstring are the spec:</p>
{_code(hints.contract(task))}
<h2>The from-scratch rule</h2>
<ul>{rule}</ul>
<h2>The check</h2>
<p><code>check("{task.id}")</code> runs your code on:</p><ul>{cases}</ul>
<p>and, when it matches the reference's outputs, says: <em>{html.escape(s.passed)}</em>.
While it does not, it says what differs and which known mistake it looks like.</p>
<pre>minilm check {task.id}        # the check's verdict
minilm hint {task.id}         # stuck? the hint ladder (--rung 2, --rung 3)
minilm test {task.id}         # the task's tests</pre>
"""


def index_body(page: str, readme_html: str) -> str:
    rows = []
    for path in notebook_paths():
        nb = f"notebooks/{path.name}"
        own = tasks.for_notebook(path.stem)
        listed = "".join(f'<li><a href="{_rel(page, task_page(t))}">Task {t.id}</a>: {html.escape(t.title)}</li>'
                         for t in own)
        rows.append(f'<li><a href="{_rel(page, notebook_page(nb))}">{path.stem}</a>'
                    + (f"<ul>{listed}</ul>" if listed else "") + "</li>")
    return readme_html + f'<h2 id="notebooks">The notebooks, in course order</h2><ol start="0">{"".join(rows)}</ol>'


def tasks_body(page: str) -> str:
    rows = "".join(f'<tr><td><a href="{_rel(page, task_page(t))}">{t.id}</a></td><td>{html.escape(t.title)}</td>'
                   f'<td><a href="{_rel(page, source_page(t.file))}"><code>{t.file}</code></a></td>'
                   f'<td><a href="{_rel(page, notebook_page(t.notebook))}">{Path(t.notebook).stem}</a></td>'
                   f"<td>{t.points}</td></tr>" for t in tasks.TASKS)
    total = sum(t.points for t in tasks.TASKS)
    return (f"<h1>Tasks</h1><p>{len(tasks.TASKS)} tasks, {total} points.</p><table><tr><th>task</th><th>what you "
            f"write</th><th>file</th><th>notebook</th><th>points</th></tr>{rows}</table>")


# ---------------------------------------------------------------- the build


def build(out: Path) -> list[str]:
    """Build the site into `out` (through a temporary folder, swapped in when complete); the pages written."""
    from pygments.formatters import HtmlFormatter

    from solutions import release

    HTMLExporter, mathjax_dir = requirements()
    stale = [p for p in notebook_paths() if unrun(p)]
    if stale:
        raise SiteError("no stored outputs in " + ", ".join(f"notebooks/{p.name}" for p in stale) + ": run "
                        f"`minilm notebooks {' '.join(p.stem for p in stale)}` first (the site shows stored outputs)")
    out = out.resolve()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise SiteError(f"{out} exists and is not a site built by `minilm site`: choose an empty or new folder")
    out.parent.mkdir(parents=True, exist_ok=True)

    notebooks = notebook_paths()
    docs = release.student_docs()
    pages = [Page("index.html", "Home")]
    for path in notebooks:
        pages.append(Page(notebook_page(f"notebooks/{path.name}"), path.stem))
        pages += [Page(task_page(t), f"Task {t.id}") for t in tasks.for_notebook(path.stem)]
    pages += [Page("tasks/index.html", "Tasks")] + [Page(f"docs/{name[:-3]}.html", name[:-3]) for name in docs]

    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    try:
        written = []

        def write(page: str, text: str) -> None:
            (scratch / page).parent.mkdir(parents=True, exist_ok=True)
            (scratch / page).write_text(text, encoding="utf-8")
            written.append(page)

        (scratch / STATIC / "mathjax").mkdir(parents=True)
        for part in MATHJAX_PARTS:
            (shutil.copytree if (mathjax_dir / part).is_dir() else shutil.copy2)(
                mathjax_dir / part, scratch / STATIC / "mathjax" / part)
        shutil.copy2(mathjax_dir.parent / "LICENSE", scratch / STATIC / "mathjax" / "LICENSE")
        (scratch / STATIC / "site.css").write_text(CSS + HtmlFormatter().get_style_defs(".highlight"),
                                                   encoding="utf-8")
        readme = release.student_readme()
        home = index_body("index.html", _markdown(readme, "index.html", "."))
        write("index.html", frame("index.html", "minilm", home, pages, math="$" in readme))
        for name, text in docs.items():
            page = f"docs/{name[:-3]}.html"
            write(page, frame(page, name[:-3], _markdown(text, page, "docs"), pages, math="$" in text))
        html_exporter = exporter(HTMLExporter)
        for path in notebooks:
            page = notebook_page(f"notebooks/{path.name}")
            write(page, render_notebook(html_exporter, path, page, pages))
        for task in tasks.TASKS:
            write(task_page(task), frame(task_page(task), f"Task {task.id}", task_body(task, task_page(task)), pages))
        write("tasks/index.html", frame("tasks/index.html", "Tasks", tasks_body("tasks/index.html"), pages))
        for file in dict.fromkeys(t.file for t in tasks.TASKS):
            page = source_page(file)
            body = (f"<h1><code>{file}</code></h1><p>The stub you fill in (the student edition's; "
                    f'<a href="{repo_link(file)}">on GitHub</a>). Its tasks: '
                    + ", ".join(f'<a href="{_rel(page, task_page(t))}">{t.id}</a>' for t in tasks.TASKS
                                if t.file == file)
                    + "</p>" + _code((ROOT / file).read_text(encoding="utf-8")))
            write(page, frame(page, file, body, pages))
        (scratch / MARKER).write_text("built by `minilm site`; the whole folder is replaced on the next build\n",
                                      encoding="utf-8")
        # Swap: the old site aside, the new one in, the old one removed.
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            out.rename(old / "site")
        scratch.rename(out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return written
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None, prog: str = "minilm site") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Build the course as a static website (offline: "
                                                             "notebooks with their stored outputs, a page per task, "
                                                             "the README and docs, MathJax included).")
    parser.add_argument("out", type=Path, help="the folder to write: new, empty, or a site built before (replaced)")
    args = parser.parse_args(argv)
    try:
        pages = build(args.out)
    except SiteError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    print(f"site: {len(pages)} pages in {args.out} ({len(notebook_paths())} notebooks, {len(tasks.TASKS)} tasks); "
          f"open {args.out / 'index.html'} through a web server (`python -m http.server -d {args.out}`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
