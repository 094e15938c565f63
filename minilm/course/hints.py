"""Graduated hints: `minilm hint ID` (provided: not an exercise).

A hint is a ladder of three rungs, each a step closer to the fix and none holding code that computes the
task's result:

    1. the contract      what the stub's signature and docstring promise, and the task's from-scratch rule
    2. where it differs  from the check's verdict on your code: the property it breaks with an example to
                         try, or which output differs, on which input, and how, in words
                         (minilm/course/difference.py), naming no mistake
    3. the idea          the spec's advice for the known mistake your output matches, or the idea that
                         mends the property your code breaks (minilm/course/exercises/), in words

Rung 1 is read from the stub's text in minilm/ (signatures and docstrings only, never a body); rungs 2
and 3 from the task's check run on your code (`checks.run`). A task still a stub has only rung 1: the
others need your code's output. Tutors (people or AI assistants, see AGENTS.md) climb it with you.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from minilm.course import tasks

RUNGS = 3
NAMES = {1: "what the contract says", 2: "where your output differs", 3: "the mistake, and the idea that fixes it"}


@dataclass(frozen=True)
class Rung:
    number: int
    title: str
    text: str

    def __str__(self) -> str:
        return f"Rung {self.number} of {RUNGS}: {self.title}\n{self.text.rstrip()}"


# ---------------------------------------------------------------- rung 1: the contract


def _header(lines: list[str], node: ast.FunctionDef | ast.ClassDef) -> str:
    """A def's or class's header lines as written (decorators left out), up to its body."""
    first = node.body[0].lineno if node.body else node.lineno + 1
    start = node.lineno - 1
    header = [line.rstrip() for line in lines[start:first - 1]]
    while header and not header[-1].strip():
        header.pop()
    indent = len(header[0]) - len(header[0].lstrip()) if header else 0
    return "\n".join(line[indent:] for line in header)


def _docstring(node) -> str:
    doc = ast.get_docstring(node)
    return "" if not doc else "\n".join("    " + line if line else "" for line in doc.splitlines())


def contract(task: tasks.Task) -> str:
    """The task's signatures and docstrings from the stub file, minilm/<module>.py: each name the task
    writes, and for a class each method the stub declares (its header and docstring, never a body)."""
    path = tasks.ROOT / task.file
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError) as e:
        return f"({task.file} cannot be read or parsed: {e}; its docstrings are the contract)"
    lines = text.splitlines()
    parts = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or node.name not in task.names:
            continue
        parts.append(f"{task.file}:{node.lineno}\n{_header(lines, node)}")
        if doc := _docstring(node):
            parts.append(doc)
        if isinstance(node, ast.ClassDef):
            for method in node.body:
                if isinstance(method, ast.FunctionDef) and (method.name in ("__init__", "forward", "step")
                                                            or ast.get_docstring(method)):
                    parts.append("    " + _header(lines, method).replace("\n", "\n    "))
                    if doc := _docstring(method):
                        parts.append("    " + doc.replace("\n", "\n    "))
    return "\n".join(parts) if parts else f"(no {', '.join(task.names)} in {task.file}: the stub defines it)"


def rule(task: tasks.Task) -> str:
    """The task's from-scratch rule in a line per family: what not to call, what to do instead."""
    from minilm.course.rules.families import FAMILIES

    if not task.forbidden:
        return "The from-scratch rule: this task may run any library function (docs/students.md)."
    lines = ["The from-scratch rule (docs/students.md): while this task runs, none of these may run:"]
    for family, instead in dict.fromkeys(task.forbidden):
        lines.append(f"  - {FAMILIES[family].summary}: {instead}")
    return "\n".join(lines)


def rung_contract(task: tasks.Task) -> Rung:
    from minilm.course import exercises

    s = exercises.get(task.id)
    cases = [c["what"] for c in s.cases()]
    outputs = ", ".join(dict.fromkeys(s.outputs.values())) or "its outputs"
    text = "\n".join([
        f"Task {task.id}: {task.title}. You write {', '.join(task.names)} in {task.file}; "
        f"{task.notebook} teaches it.",
        "",
        contract(task),
        "",
        rule(task),
        "",
        f"The check runs your code on {'; '.join(cases)} and compares {outputs} with the reference's; "
        f"when it passes it says: {s.passed}.",
        "Ask yourself: what shape does each input have, what shape must come out, and which line of the "
        "docstring have you not used yet?",
    ])
    return Rung(1, NAMES[1], text)


# ---------------------------------------------------------------- rungs 2 and 3: from the verdict


def _advice(task_id: str, mistake: str) -> tuple[str, str] | None:
    """The spec's (label, advice) of a catalogued mistake, by the name a verdict gives."""
    from minilm.course import exercises

    for label, advice in exercises.get(task_id).mistakes.items():
        if label.split(" ")[0] == mistake:
            return label, advice
    return None


def _unnamed(task_id: str) -> str:
    """Rung 3 where the check names neither a known mistake nor a broken property."""
    from minilm.course import exercises

    s = exercises.get(task_id)
    known = f"none of the {len(s.mistakes)} mistakes this task's check knows" if s.mistakes else "no known mistake"
    properties = f", and breaks none of its {len(s.properties)} properties" if s.properties else ""
    return (f"Your output matches {known}{properties}. Read the docstring one sentence at a time and find "
            "the line of your code that does each: the sentence with no line is the bug.")


def _property(task_id: str, says: str | None):
    """The spec's Property whose `says` a verdict names, or None."""
    from minilm.course import exercises

    return next((p for p in exercises.get(task_id).properties if p.says == says), None) if says else None


def rung_difference(v) -> Rung:
    """Where the output differs, from a failing verdict, naming no mistake."""
    from minilm.course import checks

    task = tasks.get(v.task)
    prop = _property(v.task, v.broken)
    if prop is not None:
        text = f"Your code breaks a property every correct {task.function} has:\n  {v.message}"
        if prop.example:
            text += "\nTry it yourself:\n" + "\n".join("    " + line for line in prop.example.splitlines())
    elif v.message.startswith(f"Task {v.task}: "):  # the from-scratch rule
        text = f"Your code breaks the task's from-scratch rule:\n  {v.message}"
    elif v.message.startswith("Task ") and " fails; fix it first" in v.message:
        text = (f"{v.message.split(':')[0]}: {task.id} runs that task's code, so its bug may be this one's. "
                f"Climb that task's ladder first (`minilm hint {v.message.split()[1]}`).")
    elif v.status == checks.ERROR:
        text = f"Your code raised an error on the check's input:\n  {v.message}\n{_error_advice(v.message)}"
    else:
        text = f"The check's first difference:\n  {v.difference or v.message}"
    if v.where:
        text += f"\nOpen {v.where} first."
    return Rung(2, NAMES[2], text)


def _error_advice(message: str) -> str:
    """What to look at for an error, by its kind: shapes only where the error is about shapes."""
    kind = message.split(":")[0].split()[-1] if ":" in message else ""
    advice = {
        "ZeroDivisionError": "Something you divide by is 0: which count or size can be 0 on this input?",
        "KeyError": "A dict lacks the key your code asks for: print the dict's keys at that line.",
        "IndexError": "An index runs past the end: compare the index with the length at that line.",
        "TypeError": "A value has another type than the line expects: print type(...) of each argument.",
        "AttributeError": "An object lacks the attribute your code uses: which object is it at that line?",
        "ValueError": "A function refused a value: read the error's words against the docstring's.",
    }
    return advice.get(kind, "Read the line it names; print the shapes and dtypes of the tensors it uses and "
                            "compare them with the docstring's.")


def rung_mistake(v) -> Rung:
    task = tasks.get(v.task)
    prop = _property(v.task, v.broken)
    if prop is not None:
        text = f"The property your code breaks: {prop.says}.\n  {prop.idea or 'Find the step that breaks it.'}"
    elif v.message.startswith(f"Task {v.task}: "):
        text = rule(task)
    elif v.mistake and (found := _advice(v.task, v.mistake)):
        label, advice = found
        text = f"Your output matches a known mistake:\n  {advice}"
    elif v.mistake:  # an invariant's finding: its message says the idea
        text = f"Your code makes a known mistake:\n  {v.message}"
    else:
        text = _unnamed(v.task)
    text += "\nFix the idea, not the number: then run the check again."
    return Rung(3, NAMES[3], text)


# ---------------------------------------------------------------- the ladder


@dataclass(frozen=True)
class Ladder:
    task: str
    status: str  # the verdict's: pass | fail | todo | error
    verdict_line: str
    rungs: tuple[Rung, ...]  # the rungs there are for this verdict: 1 for a stub or a pass, else 3
    note: str = ""  # why there are fewer than RUNGS

    @property
    def short_line(self) -> str:
        from minilm.course import checks

        words = {checks.FAIL: "fails its check", checks.ERROR: "raises an error in its check"}
        if self.status not in words:
            return self.verdict_line
        task = tasks.get(self.task)
        return f"{checks.SYMBOL[self.status]} Task {task.id} {task.function}: {words[self.status]}"

    def show(self, upto: int) -> str:
        """Rung `upto` (or the last there is), with the verdict and where to go next. Below the top rung a
        failing verdict is shown without its words, which may name the mistake the top rung is for."""
        n = max(1, min(upto, len(self.rungs)))
        line = self.verdict_line if n == len(self.rungs) else self.short_line
        parts = [line, "", str(self.rungs[n - 1])]
        if upto > len(self.rungs) and self.note:
            parts += ["", self.note]
        elif n < len(self.rungs):
            parts += ["", f"Still stuck? `minilm hint {self.task} --rung {n + 1}`: {NAMES[n + 1]}."]
        elif self.note:
            parts += ["", self.note]
        return "\n".join(parts) + "\n"


def ladder(task_id: str, verdict=None) -> Ladder:
    """Every rung there is for `task_id`, driven by `verdict` (default: the task's check run on your code)."""
    from minilm.course import checks

    task = tasks.get(task_id)
    v = checks.run(task_id) if verdict is None else verdict
    first = rung_contract(task)
    if v.status == checks.TODO:
        return Ladder(task_id, v.status, v.line, (first,),
                      f"Task {task_id} is still a stub, so this first rung is all there is: the next rungs need your "
                      f"code's output. Write the body, run `minilm check {task_id}`, then ask again.")
    if v.status == checks.PASS:
        return Ladder(task_id, v.status, v.line, (first,),
                      f"Task {task_id} passes its check: no hint needed (`minilm test {task_id}` runs its tests).")
    return Ladder(task_id, v.status, v.line, (first, rung_difference(v), rung_mistake(v)))
