import sys

from solutions.grading.cli import main

sys.exit(main())
