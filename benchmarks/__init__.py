"""Benchmarks of the reference implementation and of the course's own tooling.

    python -m benchmarks                 # the full run: about 15 minutes on 2 cores
    python -m benchmarks --quick         # a few minutes: shows that every part still works
    python -m benchmarks --smoke         # --quick at toy sizes, its figures meaningless (the tests, CI)

Everything compared is measured side by side in one run, interleaved, and compared by its
median, since these machines are shared and noisy. See benchmarks/__main__.py.
"""
