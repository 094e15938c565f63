"""Grading (provided; the reference side is for instructors): trusted verdicts on untrusted code.

    python -m minilm.course.grading alice/ bob.zip --out grades/      (also: minilm grade)

What runs where:
- the **worker** (worker.py) runs a submission's code in a sandbox (sandbox.py: bubblewrap, or a
  container) on inputs the grader chose (each task's spec, minilm/course/spec/), and writes its outputs as plain data;
- nbval runs every notebook against the submission in the same kind of sandbox;
- the **grader** (cli.py, judge.py, reports.py) never imports the submission: it computes the
  reference's outputs, compares, and alone writes grades and feedback.
"""
