"""Gradebook CSVs for an LMS import (Canvas, Moodle), from the grader's results and a roster.

    minilm grade subs/* --out grades/ --lms canvas --roster roster.csv

The roster is a CSV with a header row: `submission` (the name grades.csv gives a submission:
its folder, zip or repository name) and `lms_id` (the student's id in the LMS: Canvas's user
ID, Moodle's ID number or email address), and optionally `name`, `section`, `sis_id` and
`sis_login` (Canvas's SIS User ID and SIS Login ID). Each task is one column, then the total.

- Canvas: Student, ID, SIS User ID, SIS Login ID, Section, one column per task, the total.
  Canvas matches rows on ID (or SIS User ID) and creates an assignment for each new column:
  import the task columns or the total, not both, or the points count twice.
- Moodle (Grades > Import > CSV file): the identifier column ("Email address" when every
  lms_id is one, else "ID number"), then the task columns and the total; map the identifier
  to the user field of the same name and each column to its grade item.

Every problem with the roster is one line, found before any grading, and nothing is written:
a roster that cannot be read, a missing column, an empty or duplicate id, a submission
missing from the roster. A roster entry without a submission gets 0 in every column and is
listed when the gradebook is written.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import tempfile
from pathlib import Path

from solutions.grading.results import StudentGrade

LMS = ("canvas", "moodle")
MAX_ROSTER_BYTES = 10 * 2**20
OPTIONAL = ("name", "section", "sis_id", "sis_login")


class RosterError(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class Student:
    submission: str
    lms_id: str
    name: str = ""
    section: str = ""
    sis_id: str = ""
    sis_login: str = ""


def read_roster(path: Path) -> list[Student]:
    path = Path(path)
    try:
        if path.stat().st_size > MAX_ROSTER_BYTES:
            raise RosterError(f"--roster {path}: over {MAX_ROSTER_BYTES // 2**20} MB, not a roster")
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as e:
        raise RosterError(f"--roster {path}: cannot read it ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise RosterError(f"--roster {path}: not UTF-8 text (byte {e.start}): save it as UTF-8 CSV") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise RosterError(f"--roster {path}: empty: it needs a header row with submission,lms_id")
    header = [h.strip().lower() for h in rows[0]]
    missing = [c for c in ("submission", "lms_id") if c not in header]
    if missing:
        raise RosterError(f"--roster {path}: no {' or '.join(missing)} column in its header "
                          f"({', '.join(rows[0]) or 'empty'}); it needs submission,lms_id")
    col = {h: i for i, h in reversed(list(enumerate(header)))}
    students, by_id, by_sub = [], {}, {}
    for n, row in enumerate(rows[1:], 2):
        if not any(cell.strip() for cell in row):
            continue
        get = lambda c: row[col[c]].strip() if c in col and col[c] < len(row) else ""  # noqa: E731
        s = Student(get("submission"), get("lms_id"), *(get(c) for c in OPTIONAL))
        if not s.submission or not s.lms_id:
            raise RosterError(f"--roster {path}:{n}: {'submission' if not s.submission else 'lms_id'} is empty")
        if s.lms_id in by_id:
            raise RosterError(f"--roster {path}:{n}: lms_id {s.lms_id!r} is already on line {by_id[s.lms_id]}: "
                              "each student needs an id of their own")
        if s.submission in by_sub:
            raise RosterError(f"--roster {path}:{n}: submission {s.submission!r} is already on line "
                              f"{by_sub[s.submission]}")
        by_id[s.lms_id], by_sub[s.submission] = n, n
        students.append(s)
    if not students:
        raise RosterError(f"--roster {path}: no students, only a header")
    return students


def check_submissions(roster: list[Student], names: list[str], path) -> None:
    """Every submission graded must have a roster entry (else its grade would go nowhere)."""
    known = {s.submission for s in roster}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise RosterError(f"--roster {path}: no entry for submission(s) {', '.join(unknown)}: add a line "
                          "submission,lms_id for each (submission is the name grades.csv gives it)")


def column(task_id: str) -> str:
    return f"minilm Task {task_id}"


TOTAL = "minilm total"


def rows(lms: str, task_ids: list[str], results: list[StudentGrade],
         roster: list[Student]) -> tuple[list[list], list[str]]:
    """The gradebook's rows (header first), and the roster entries that had no submission."""
    by_name = {r.student: r for r in results}
    scores = [*map(column, task_ids), TOTAL]
    if lms == "canvas":
        out = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *scores]]
    elif lms == "moodle":
        ident = "Email address" if all("@" in s.lms_id for s in roster) else "ID number"
        out = [[ident, *scores]]
    else:
        raise ValueError(f"unknown LMS {lms!r}: {', '.join(LMS)}")
    absent = []
    for s in roster:
        r = by_name.get(s.submission)
        if r is None:
            absent.append(s.submission)
            points = [0] * len(task_ids) + [0]
        else:
            points = [r.tasks[t].points for t in task_ids] + [r.total]
        if lms == "canvas":
            out.append([s.name or s.submission, s.lms_id, s.sis_id, s.sis_login, s.section, *points])
        else:
            out.append([s.lms_id, *points])
    return out, absent


def write(path: Path, lms: str, task_ids: list[str], results: list[StudentGrade], roster: list[Student]) -> list[str]:
    """Write the gradebook whole or not at all (a temporary file renamed into place)."""
    table, absent = rows(lms, task_ids, results, roster)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".gradebook-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(table)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return absent
