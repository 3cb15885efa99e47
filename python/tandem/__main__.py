"""python -m tandem inspect FILE | check FILE | export DIR -o FILE (see tandem/cli.py)."""

import sys

from .cli import main

sys.exit(main())
