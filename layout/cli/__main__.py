"""`python -m layout.cli`, as the `lakesort` console script."""

import sys

from layout.cli import main

sys.exit(main())
