import sys

from minilm.course.grading.cli import main

sys.exit(main())
