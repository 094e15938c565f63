"""The trusted grader (instructors only; never in the student edition): it decides every point.

    minilm grade alice/ bob.zip --out grades/      (also: python -m solutions.grading)

What runs where:
- inside a sandbox per submission (sandbox.py: bubblewrap, or a container), the course's
  untrusted side, minilm/course/sandboxed/: the worker runs the submission's code on inputs
  chosen here and writes its outputs as plain data; nbval runs the notebooks against it;
- here, in a process that never imports a submission (cli.py, judge.py, reports.py, lms.py,
  gradescope.py): the reference's outputs, the comparison, the grades and the feedback.
"""
