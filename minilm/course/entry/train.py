"""`python -m minilm.train …`: the same as `minilm train …` (minilm/course/train/run.py)."""

import sys

if __name__ == "__main__":
    from minilm.course.train.run import main

    sys.exit(main(prog="python -m minilm.train"))
