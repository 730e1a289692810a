"""``python -m nqfbook``: the book's runner (see :mod:`nqfbook`)."""

import sys

from .cli import main

sys.exit(main())
