"""`python -m minilm.grade …`: the same as `minilm grade …` (minilm/course/grading/)."""

import sys

if __name__ == "__main__":
    from minilm.course.grading.cli import main

    sys.exit(main(prog="python -m minilm.grade"))
