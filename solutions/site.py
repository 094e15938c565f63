"""`minilm site OUT`: the course as a static website, readable offline.

    minilm site site/            # build (or rebuild) the site in site/; open site/index.html through any web server

What students see, rendered: the student edition's README (the home page, with the notebooks in course order)
and docs, every notebook with its stored outputs, a page per task (its contract from the stub: each signature
as a Python block and its docstring as text; its from-scratch rule, what its check runs, the commands) linking
the stub file's page, a page listing the tasks, and each stub file as a page.

It is a Sphinx site: MyST-NB reads the notebooks (never running them: `nb_execution_mode = "off"`) and the
Markdown this module writes for the other pages, and sphinx-book-theme lays it out: a chapter sidebar (the
notebooks in course order, each with its tasks, then the task list, the students' doc and the stub files),
the page's contents beside it, search (Sphinx's own index, in the browser), dark mode, prev/next links in
course order, and on a notebook's page its Colab and Binder links and a download of the .ipynb (the student
edition's notebook as it is). Math is typeset by MathJax 3 from the `sphinx-mathjax-offline` package (MathJax's
own files, copied into the site), so neither the build nor the site fetches anything from another site.

What the pages show differs from the .ipynb only where the reader gains: the install cell is left out, the
launch cell's badges (images on other sites) become plain links beside the download, comments that speak to
the test harness (`# NBVAL_…`, `# release: …`) are dropped from code cells, and a widget output shows its
stored picture (solutions/notebooks.py keeps the PNG of the explorer) with a note that the notebook is
interactive in JupyterLab.

The site is built in a temporary folder beside OUT and swapped in only when complete, so a failed build
leaves an earlier site as it was. OUT must be empty, absent, or a site this command built.
"""

from __future__ import annotations

import ast
import copy
import html
import importlib
import io
import os
import re
import shutil
import sys
import tempfile
import time
import warnings as python_warnings
from dataclasses import dataclass, field
from pathlib import Path

from minilm.course import tasks
from minilm.course.cli import Parser
from minilm.course.tasks import ROOT

MARKER = ".minilm-site"  # in every site this command builds: OUT may be replaced only when it holds one
# What the build imports, and the package that brings each (the `dev` extra has them all).
BUILDERS = {"sphinx": "sphinx", "myst_nb": "myst-nb", "sphinx_book_theme": "sphinx-book-theme",
            "sphinx-mathjax-offline": "sphinx-mathjax-offline"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ("A still picture of an interactive explorer: open this notebook in JupyterLab (or Colab, "
               "Binder) and run it to move its sliders.")
BADGE = re.compile(r"\[!\[([^\]]*)\]\([^)]*\)\]\(([^)]*)\)")  # [![alt](image)](target)
# Comments for the test harness, not for readers: nbval's markers on a line of their own, and the release
# check's `# release: …` notes at the end of a line.
HARNESS_LINE = re.compile(r"^[ \t]*# NBVAL_[A-Z_]+\b[^\n]*(?:\n|$)", re.M)
HARNESS_NOTE = re.compile(r"[ \t]*# release: [^\n]*")
MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|$])")


class SiteError(Exception):
    pass


@dataclass
class Built:
    pages: list[str]  # the HTML pages, relative to the site
    warnings: list[str] = field(default_factory=list)  # what Sphinx warned about (none, in a sound build)
    seconds: float = 0.0


# ---------------------------------------------------------------- what the site needs


def requirements() -> None:
    """Sphinx, MyST-NB, the book theme and the offline MathJax, or SiteError saying what to install."""
    missing = []
    for module, package in BUILDERS.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    if missing:
        raise SiteError(f"the site builder needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'}"
                        f" not installed: run `python -m pip install -e \".[dev]\"` (or `python -m pip install "
                        f"{' '.join(missing)}`)")


def notebook_paths() -> list[Path]:
    return tasks.course_notebooks()


def unrun(path: Path) -> bool:
    """A notebook whose code cells store no output at all (never run, or cleared)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    return bool(code) and not any(c.get("outputs") for c in code)


# ---------------------------------------------------------------- pages and links

# The site mirrors its Sphinx sources: notebooks/05_rope.ipynb is the page notebooks/05_rope.html, the
# generated tasks/5.1.md is tasks/5.1.html, src/minilm/rope.py.md (the stub's page) src/minilm/rope.py.html.


def notebook_page(nb_path: str) -> str:
    return f"notebooks/{Path(nb_path).stem}.html"


def task_page(task: tasks.Task) -> str:
    return f"tasks/{task.id}.html"


def source_page(file: str) -> str:
    return f"src/{file}.html"


def download(nb_path: str) -> str:
    """Where the site keeps a notebook's .ipynb (the theme's download button points there too)."""
    return f"_sources/notebooks/{Path(nb_path).name}"


def _rel(frm: str, to: str) -> str:
    """A link from the page (or source) `frm` to `to`, both relative to the site."""
    return os.path.relpath(to, os.path.dirname(frm) or ".").replace(os.sep, "/")


def _src(page: str) -> str:
    """The Markdown source of one of our pages: tasks/3.1.html -> tasks/3.1.md."""
    return page.removesuffix(".html") + ".md"


def repo_link(file: str) -> str:
    from solutions import launch

    return f"{launch.repository_url()}/blob/{launch.release_tag()}/{file}"


def rewrite_link(target: str, source: str, docs: tuple[str, ...] = ()) -> str:
    """A Markdown link of the README, a doc or a notebook (`source`, its path in the repository) as the site's
    source links it: README.md to the home page, a doc of the site or a notebook to its source (MyST makes that
    a link to its page), a stub file to its page, and any other file of the repository to its address there."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target, flags=re.I) or target.startswith("#"):
        return target
    file, _, anchor = target.partition("#")
    path = os.path.normpath(os.path.join(os.path.dirname(source), file)).replace(os.sep, "/")
    if path == "README.md":
        to = "index.md"
    elif path in docs or (path.startswith("notebooks/") and path.endswith(".ipynb")):
        to = path
    elif path in {t.file for t in tasks.TASKS}:
        to = _src(source_page(path))
    else:
        return repo_link(path) + (f"#{anchor}" if anchor else "")
    return _rel(source, to) + (f"#{anchor}" if anchor else "")


def markdown(text: str, source: str, docs: tuple[str, ...] = ()) -> str:
    """Markdown of the repository as the site's source: badges (images from elsewhere) as plain links, and
    every link rewritten for the site (rewrite_link)."""
    text = BADGE.sub(lambda m: f"[{m.group(1)}]({m.group(2)})", text)
    return re.sub(r"\]\(([^)\s]+)\)", lambda m: f"]({rewrite_link(m.group(1), source, docs)})", text)


def _escape(text: str) -> str:
    """Plain text as Markdown that shows it as it is."""
    return MD_SPECIAL.sub(r"\\\1", text)


def _fence(body: str, info: str) -> str:
    ticks = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", body)), default=0))
    return f"{ticks}{info}\n{body}\n{ticks}\n"


def title_of(path: Path) -> str:
    """A notebook's title: its first heading ("03 · RMSNorm")."""
    import nbformat

    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown" and (m := re.search(r"^#\s+(.+)$", cell.source, flags=re.M)):
            return m.group(1).strip()
    return path.stem


# ---------------------------------------------------------------- notebooks


def reader_code(source: str) -> str:
    """A code cell's source without the comments that speak to the test harness."""
    return HARNESS_NOTE.sub("", HARNESS_LINE.sub("", source))


def launch_links(nb_path: str) -> str:
    """The launch cell as the site shows it: Colab, Binder and the download, as plain links (raw HTML, so
    MyST keeps the download a link to the file rather than to this very page)."""
    from solutions import launch

    page = notebook_page(nb_path)
    links = [f'<a href="{html.escape(launch.colab_url(nb_path))}">Open in Colab</a>',
             f'<a href="{html.escape(launch.binder_url(nb_path))}">Launch on Binder</a>',
             f'<a href="{_rel(page, download(nb_path))}" download>Download {Path(nb_path).name}</a>']
    return f'<p class="minilm-launch">{" ".join(links)}</p>'


def prepare_notebook(nb, nb_path: str, docs: tuple[str, ...] = ()):
    """A copy of a stored notebook as the site reads it: the install cell out, the badges as links beside the
    download, harness comments out, links rewritten for the site, each widget output as its stored picture
    with a note (or the note alone), never the widget's text repr; and a hidden table of contents of the
    notebook's tasks, which puts their pages after the notebook's in the sidebar and in prev/next."""
    import nbformat

    from solutions import launch

    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        tagged = launch.TAG in cell.get("metadata", {}).get("tags", [])
        if tagged and cell.cell_type == "code":
            continue
        if tagged:
            cell.source = launch_links(nb_path)
        elif cell.cell_type == "markdown":
            cell.source = markdown(cell.source, nb_path, docs)
        elif cell.cell_type == "code":
            cell.source = reader_code(cell.source)
            outputs = []
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                if WIDGET_VIEW in data:
                    if "image/png" in data:  # at its display size: the PNG has twice its pixels
                        shown = {k: v for k, v in out.get("metadata", {}).items() if k == "image/png"}
                        outputs.append({"output_type": "display_data", "metadata": shown,
                                        "data": {"image/png": data["image/png"]}})
                    out = {"output_type": "display_data", "metadata": {},
                           "data": {"text/html": f'<div class="minilm-widget-note">{WIDGET_NOTE}</div>'}}
                outputs.append(out)
            cell.outputs = [nbformat.from_dict(o) for o in outputs]
        cells.append(cell)
    own = tasks.for_notebook(Path(nb_path).stem)
    if own:
        entries = "\n".join(f"/{task_page(t).removesuffix('.html')}" for t in own)
        cells.append(nbformat.v4.new_markdown_cell(f"```{{toctree}}\n:hidden:\n\n{entries}\n```"))
    nb.cells = cells
    nb.metadata.pop("widgets", None)
    return nb


# ---------------------------------------------------------------- task, stub, index and home pages


def _docstring(doc: str) -> str:
    """A docstring as text that wraps on a narrow screen: prose paragraphs joined into one line each,
    indented or listed lines kept as they are."""
    blocks = []
    for block in re.split(r"\n\s*\n", doc.strip()):
        lines = block.splitlines()
        listed = any(re.match(r"\s|[-*•]\s|\d+[.)]\s", line) for line in lines[1:]) or re.match(r"[-*•]\s", block)
        blocks.append(block if listed else " ".join(line.strip() for line in lines))
    return "\n\n".join(blocks)


def contract(task: tasks.Task) -> str:
    """The task's contract as Markdown: each name's (and method's) signature as a Python block, its docstring
    as text beneath: what `minilm hint` prints as the contract, laid out to read."""
    from minilm.course.hints import _header

    text = (ROOT / task.file).read_text(encoding="utf-8")
    lines, parts = text.splitlines(), []

    def one(node, what: str) -> None:
        parts.append(f"{what} (`{task.file}`, line {node.lineno}):\n")
        parts.append(_fence(_header(lines, node), "python"))
        if doc := ast.get_docstring(node):
            parts.append(_fence(f":class: minilm-docstring\n\n{_docstring(doc)}", "{code-block} text"))

    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in task.names:
            one(node, f"`{node.name}`")
            if isinstance(node, ast.ClassDef):
                for method in node.body:
                    if isinstance(method, ast.FunctionDef) and (method.name in ("__init__", "forward", "step")
                                                                or ast.get_docstring(method)):
                        one(method, f"`{node.name}.{method.name}`")
    return "\n".join(parts) or f"(no {', '.join(task.names)} in {task.file}: the stub defines it)"


def task_source(task: tasks.Task) -> str:
    from minilm.course import exercises, hints

    here = _src(task_page(task))
    s = exercises.get(task.id)
    cases = "".join(f"- {_escape(c['what'])}\n" for c in s.cases())
    rule = "".join(f"- {_escape(line.strip().removeprefix('- '))}\n" for line in hints.rule(task).splitlines()[1:])
    uses = ", ".join(f"[Task {u}]({_rel(here, _src(task_page(tasks.get(u))))})" for u in task.uses)
    names = ", ".join(f"`{n}`" for n in task.names)
    commands = (f"minilm check {task.id}        # the check's verdict\n"
                f"minilm hint {task.id}         # stuck? the hint ladder (--rung 2, --rung 3)\n"
                f"minilm test {task.id}         # the task's tests")
    return f"""# Task {task.id}: {_escape(task.title)}

You write {names} in [`{task.file}`]({_rel(here, _src(source_page(task.file)))}) ([on GitHub]({repo_link(task.file)})),
taught in [{title_of(ROOT / task.notebook)}]({_rel(here, task.notebook)}). {task.points} points.
{f'It uses your code of {uses}.' if uses else ''}

## The contract

The stub's signature, shape annotations and docstring are the spec.

{contract(task)}

## The from-scratch rule

{rule or "- no built-in beyond the allowed list" + chr(10)}
## The check

`check("{task.id}")` runs your code on:

{cases}
and, when it matches the reference's outputs, says: *{_escape(s.passed)}*.
While it does not, it says what differs and which known mistake it looks like.

{_fence(commands, "bash")}"""


def tasks_source() -> str:
    here = "tasks/index.md"
    rows = "".join(f"| [{t.id}]({_rel(here, _src(task_page(t)))}) | {_escape(t.title)} "
                   f"| [`{t.file}`]({_rel(here, _src(source_page(t.file)))}) "
                   f"| [{Path(t.notebook).stem}]({_rel(here, t.notebook)}) | {t.points} |\n" for t in tasks.TASKS)
    total = sum(t.points for t in tasks.TASKS)
    return (f"# Tasks\n\n{len(tasks.TASKS)} tasks, {total} points, in course order: each is taught in its notebook"
            f" and written in its stub file.\n\n| task | what you write | file | notebook | points |\n"
            f"| --- | --- | --- | --- | --- |\n{rows}")


def stub_files() -> list[str]:
    return list(dict.fromkeys(t.file for t in tasks.TASKS))


def stub_source(file: str) -> str:
    here = _src(source_page(file))
    own = ", ".join(f"[{t.id}]({_rel(here, _src(task_page(t)))})" for t in tasks.TASKS if t.file == file)
    return (f"# `{file}`\n\nThe stub you fill in (the student edition's; [on GitHub]({repo_link(file)})). "
            f"Its tasks: {own}.\n\n" + _fence((ROOT / file).read_text(encoding="utf-8").rstrip("\n"), "python"))


def stubs_source() -> str:
    here = "src/index.md"
    rows = "".join(f"- [`{f}`]({_rel(here, _src(source_page(f)))}): tasks "
                   + ", ".join(t.id for t in tasks.TASKS if t.file == f) + "\n" for f in stub_files())
    toctree = "\n".join(_src(source_page(f)).removeprefix("src/").removesuffix(".md") for f in stub_files())
    return (f"# Your files\n\nThe stubs you fill in, one module each, in course order:\n\n{rows}\n"
            f"```{{toctree}}\n:hidden:\n\n{toctree}\n```\n")


def home_source(readme: str, docs: tuple[str, ...]) -> str:
    """The student README, then the notebooks in course order with their tasks; and the tables of contents
    that make the sidebar: the notebooks (each with its tasks, from its own hidden table), then the rest."""
    rows = []
    for path in notebook_paths():
        rows.append(f"{path.stem.split('_')[0]}. [{_escape(title_of(path))}](notebooks/{path.name})")
        rows += [f"    - [Task {t.id}]({_src(task_page(t))}): {_escape(t.title)}"
                 for t in tasks.for_notebook(path.stem)]
    notebooks = "\n".join(f"notebooks/{p.stem}" for p in notebook_paths())
    rest = "\n".join(["tasks/index", *(d.removesuffix(".md") for d in docs), "src/index"])
    return (markdown(readme, "README.md", docs).rstrip() + "\n\n## The notebooks, in course order\n\n"
            + "\n".join(rows) + f"\n\n```{{toctree}}\n:hidden:\n:caption: Notebooks\n\n{notebooks}\n```\n\n"
            f"```{{toctree}}\n:hidden:\n:caption: Reference\n\n{rest}\n```\n")


# ---------------------------------------------------------------- Sphinx's configuration and our style

CSS = """
/* Prose at a readable measure (about 80 characters a line); code and outputs may use the column's width. */
.bd-article { max-width: 52rem; overflow-wrap: break-word; }
.bd-article p, .bd-article li, .bd-article dl { max-width: 42rem; }
/* Plots at their natural size, never wider than the column. */
.bd-article img { max-width: 100%; height: auto; }
/* On a phone a wide plot keeps a readable size (up to twice the screen's width) and scrolls sideways in its own
   box, never the page. */
@media (max-width: 600px) {
  :root { --pst-font-size-h1: 2rem; --pst-font-size-h2: 1.6rem; --pst-font-size-h3: 1.3rem; }
  div.cell_output { overflow-x: auto; }
  div.cell_output > img { max-width: 200%; }
  /* an inline code span longer than the screen (a call with its arguments) breaks rather than push the page */
  code.literal span.pre { white-space: normal; overflow-wrap: anywhere; }
}
/* A docstring reads as text: wrapped, in the body's font. */
div.minilm-docstring pre { white-space: pre-wrap; font-family: var(--pst-font-family-base); font-size: .95em; }
.minilm-widget-note { background: var(--pst-color-warning-bg); border-left: 4px solid var(--pst-color-warning);
  padding: .4rem .8rem; margin: .3rem 0; font-size: .9em; color: var(--pst-color-text-base); }
p.minilm-launch { display: flex; flex-wrap: wrap; gap: .5rem; }
p.minilm-launch a { border: 1px solid var(--pst-color-border); border-radius: 4px; padding: .1rem .6rem;
  text-decoration: none; }
"""

# Search results quote the page around the word found; Sphinx takes the text of all of [role=main], which in
# this theme starts with the buttons above the article ("System Settings Light Dark"): quote the article alone.
JS = """
if (typeof Search !== "undefined") {
  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    doc.querySelectorAll(".headerlink, script, style, .toctree-wrapper").forEach((el) => el.remove());
    const article = doc.querySelector("article") || doc.querySelector('[role="main"]') || doc.body;
    const part = anchor ? article.querySelector(anchor) : null;
    return (part || article).textContent;
  };
}
"""

FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
           'fill="#1f2933"/><text x="8" y="12" font-size="11" text-anchor="middle" fill="#fff" '
           'font-family="sans-serif">m</text></svg>\n')


def configuration() -> dict:
    from solutions import launch

    return {
        "project": "minilm",
        "author": "the minilm course",
        "html_title": "minilm",
        "extensions": ["myst_nb", "sphinx-mathjax-offline"],
        "exclude_patterns": ["_build", "**.ipynb_checkpoints"],
        "nb_execution_mode": "off",  # the stored outputs, never a kernel
        "nb_ipywidgets_js": {},  # the widget manager is fetched from elsewhere: the site shows pictures instead
        "nb_merge_streams": True,
        "myst_enable_extensions": ["dollarmath", "amsmath", "colon_fence"],
        "myst_heading_anchors": 4,  # GitHub's heading anchors, so the docs' links to "#the-from-scratch-rules" hold
        "mathjax3_config": {"tex": {"tags": "ams"}},
        "html_theme": "sphinx_book_theme",
        "html_theme_options": {
            "repository_url": launch.repository_url(),
            "repository_branch": launch.release_tag(),
            "path_to_docs": "",
            "use_repository_button": True,
            "use_download_button": True,
            "use_fullscreen_button": False,
            "launch_buttons": {"binderhub_url": "https://mybinder.org",
                               "colab_url": "https://colab.research.google.com",
                               "notebook_interface": "jupyterlab"},
            "home_page_in_toc": True,
            "show_toc_level": 2,
            "show_navbar_depth": 1,
            "navbar_persistent": [],  # the search field is in the sidebar (and Ctrl+K): no bar above the page
        },
        "html_context": {"default_mode": "auto"},  # light or dark as the reader's system is; the button switches
        "html_static_path": ["_static"],
        "html_css_files": ["minilm.css"],
        "html_js_files": [("minilm.js", {"defer": "defer"})],
        "html_favicon": "_static/favicon.svg",
        "html_copy_source": True,
        "html_sourcelink_suffix": "",
        "html_show_sphinx": False,
        "html_show_copyright": False,
        "suppress_warnings": ["mystnb.unknown_mime_type"],
    }


def write_sources(source: Path) -> list[str]:
    """The Sphinx project of the site in `source`; the pages it makes, relative to the site."""
    import nbformat

    from solutions import release

    def write(path: str, text: str) -> None:
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(text, encoding="utf-8")

    docs = {f"docs/{name}": text for name, text in release.student_docs().items()}
    names = tuple(docs)
    (source / "_static").mkdir(parents=True)
    write("_static/minilm.css", CSS)
    write("_static/minilm.js", JS)
    write("_static/favicon.svg", FAVICON)
    write("conf.py", "".join(f"{k} = {v!r}\n" for k, v in configuration().items()))
    write("index.md", home_source(release.student_readme(), names))
    for name, text in docs.items():
        write(name, markdown(text, name, names))
    for path in notebook_paths():
        nb_path = f"notebooks/{path.name}"
        nb = prepare_notebook(nbformat.read(path, as_version=4), nb_path, names)
        write(nb_path, nbformat.writes(nb))
    for task in tasks.TASKS:
        write(_src(task_page(task)), task_source(task))
    write("tasks/index.md", tasks_source())
    write("src/index.md", stubs_source())
    for file in stub_files():
        write(_src(source_page(file)), stub_source(file))
    pages = ["index.html", "tasks/index.html", "src/index.html"]
    pages += [f"{d.removesuffix('.md')}.html" for d in docs]
    pages += [notebook_page(p.name) for p in notebook_paths()]
    pages += [task_page(t) for t in tasks.TASKS] + [source_page(f) for f in stub_files()]
    return pages


def run_sphinx(source: Path, html_dir: Path, doctrees: Path) -> list[str]:
    """Sphinx's HTML build of `source` into `html_dir`; its warnings. SiteError when it fails."""
    from sphinx.application import Sphinx
    from sphinx.errors import SphinxError
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    warnings = io.StringIO()
    try:
        # The extensions' use of APIs Sphinx will remove is theirs to change, not the reader's to see.
        with patch_docutils(str(source)), docutils_namespace(), python_warnings.catch_warnings():
            python_warnings.simplefilter("ignore", PendingDeprecationWarning)
            python_warnings.simplefilter("ignore", DeprecationWarning)
            app = Sphinx(str(source), str(source), str(html_dir), str(doctrees), "html", status=None,
                         warning=warnings, freshenv=True, verbosity=0)
            app.build(force_all=True)
    except SphinxError as e:
        raise SiteError(f"Sphinx failed: {e}") from e
    if app.statuscode:
        raise SiteError("Sphinx failed:\n" + warnings.getvalue())
    return [w for w in re.split(r"\n(?=\S)", warnings.getvalue().strip()) if w]


# ---------------------------------------------------------------- the build


def build(out: Path) -> Built:
    """Build the site into `out` (through a temporary folder, swapped in when complete)."""
    started = time.monotonic()
    requirements()
    stale = [p for p in notebook_paths() if unrun(p)]
    if stale:
        raise SiteError("no stored outputs in " + ", ".join(f"notebooks/{p.name}" for p in stale) + ": run "
                        f"`minilm notebooks {' '.join(p.stem for p in stale)}` first (the site shows stored outputs)")
    out = out.resolve()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise SiteError(f"{out} exists and is not a site built by `minilm site`: choose an empty or new folder")
    out.parent.mkdir(parents=True, exist_ok=True)

    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    try:
        pages = write_sources(scratch / "source")
        site = scratch / "site"
        warnings = run_sphinx(scratch / "source", site, scratch / "doctrees")
        missing = [p for p in pages if not (site / p).is_file()]
        if missing:
            raise SiteError(f"Sphinx wrote no {', '.join(missing)}")
        for path in notebook_paths():  # the download: the student edition's notebook as it is
            shutil.copy2(path, site / download(path.name))
        (site / MARKER).write_text("built by `minilm site`; the whole folder is replaced on the next build\n",
                                   encoding="utf-8")
        # Swap: the old site aside, the new one in, the old one removed.
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            out.rename(old / "site")
        site.rename(out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return Built(pages, warnings, time.monotonic() - started)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None, prog: str = "minilm site") -> int:
    parser = Parser(prog=prog, description="Build the course as a static website (offline: "
                                           "notebooks with their stored outputs, a page per task, "
                                           "the README and docs, search, MathJax included).")
    parser.add_argument("out", type=Path, help="the folder to write: new, empty, or a site built before (replaced)")
    args = parser.parse_args(argv)
    try:
        built = build(args.out)
    except SiteError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    for warning in built.warnings:
        print(f"{prog}: warning: {warning}", file=sys.stderr)
    print(f"site: {len(built.pages)} pages in {args.out} ({len(notebook_paths())} notebooks, {len(tasks.TASKS)} "
          f"tasks) in {built.seconds:.0f} s; open {args.out / 'index.html'} through a web server "
          f"(`python -m http.server -d {args.out}`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
