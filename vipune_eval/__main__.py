"""``python -m vipune_eval`` is ``vipune-eval``."""

import sys

from vipune_eval.cli import main

if __name__ == "__main__":
    sys.exit(main())
