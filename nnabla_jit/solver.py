"""``nnabla.solver``: where nnabla defines ``Solver``, ``SolverState`` and the solver classes
(``nnabla.solvers`` re-exports them). Both names lead to :mod:`nnabla_jit.solvers`, so
``import nnabla_jit.solver as S`` and ``import nnabla_jit.solvers as S`` are the same solvers."""
from .solvers import *  # noqa: F401,F403
from .solvers import __all__  # noqa: F401
