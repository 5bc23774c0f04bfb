"""`python -m probectl` runs the command line."""
import os

import _signal  # type: ignore[import-not-found]  # (the C module: `signal` itself imports enum)

# Ctrl-C during the imports below ends the program quietly with 130 (probectl.cli explains; the
# command gets KeyboardInterrupt back): set before them, as the program's very first act.
INT_HANDLER_AT_START = _signal.getsignal(_signal.SIGINT)
if INT_HANDLER_AT_START is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, lambda signum, frame: os._exit(130))

from .cli import main  # noqa: E402

main()
