"""`python -m minilm.grade`: the grader's command line (the code lives in minilm/grading/)."""

import sys

from minilm.grading.cli import main

if __name__ == "__main__":
    sys.exit(main())
