"""``python -m streamtasks`` runs the command line."""

import sys

from streamtasks.cli import main

sys.exit(main())
