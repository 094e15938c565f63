"""Imported first by every pytest run in the course (pyproject's addopts), before nbval, and by `minilm`.

nbval imports nbformat, which imports jsonschema, whose format checkers import rfc3987_syntax when
it is installed (jupyter-events asks for jsonschema[format-nongpl]); that module builds some thirty
Earley parsers at import: one to two seconds of every pytest process's start-up, on a laptop, in
each grader's sandboxed run and each xdist worker (python-jsonschema/jsonschema#1428). Nothing in
the course validates IRIs, so the import is refused here, and jsonschema goes on without those two
format checkers ("iri", "iri-reference"), as it does wherever the package is not installed.
"""

import sys

if "jsonschema" not in sys.modules:
    sys.modules.setdefault("rfc3987_syntax", None)
