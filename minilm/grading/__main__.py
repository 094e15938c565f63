import sys

from minilm.grading.cli import main

sys.exit(main())
