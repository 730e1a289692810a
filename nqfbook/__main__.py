"""``python -m nqfbook``: the book's runner (see :mod:`nqfbook`)."""

import sys

from .processes import skip_slow_imports

skip_slow_imports()  # before nbformat is imported (nqfbook.processes.SKIPPED_IMPORTS says why)

from .cli import main  # noqa: E402

sys.exit(main())
