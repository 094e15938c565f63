"""`python -m minilm.course.train …` and `torchrun … -m minilm.course.train …`: the same as
`minilm train …` (run.py)."""

import sys

from minilm.course.train.run import main

if __name__ == "__main__":
    sys.exit(main())
