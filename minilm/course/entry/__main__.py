"""`python -m minilm …`: the same as the `minilm` command (minilm/course/cli.py)."""

import sys

from minilm.course.cli import main

sys.exit(main())
