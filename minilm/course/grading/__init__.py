"""The probes the grader's worker collects (minilm/course/grading/probes.py)."""
