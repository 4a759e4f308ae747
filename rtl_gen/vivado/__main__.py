"""``python -m rtl_gen.vivado``: the command line of :mod:`rtl_gen.vivado.cli`.

The parser lives in ``cli.py`` so that ``from rtl_gen.vivado import main`` does not import this
module: ``runpy`` warns when a package's ``__main__`` is already imported before it runs.
"""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
