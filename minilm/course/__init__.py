"""The course's provided code: nothing here is yours to edit.

Your files are the exercise modules one level up, in minilm/. This package holds what the course
gives you: the task registry (tasks.py), each task's spec (spec/: its inputs, outputs and
invariants), the check cells (checks.py and expected.pt), the from-scratch rule (rules/: what runs
is watched; families.py lists what each task may not run), input validation called from your stubs
(validate.py), data and tokenizer download (corpus.py), the training command's vocabulary
(vocab.py), plots and widgets (viz/), the `minilm` command (cli.py and commands/), the training
command (train/), the notebooks' environment (nbenv.py), how notebook cells are counted (cells.py),
and what runs in the grader's sandbox (sandboxed/: it decides nothing; the grader itself is your
instructor's).
"""
