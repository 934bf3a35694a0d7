"""``python -m nnabla_jit``: the command line (see ``nnabla_jit.utils.cli``)."""
import sys

from .utils.cli import main

sys.exit(main())
