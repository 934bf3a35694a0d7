"""Differential testing against nnabla 1.39: cases drawn from nnabla's function table
(``cases``), run the same way on either library (``runner``), stored as fixtures (``store``);
``generate`` records nnabla's results under the oracle, ``tests/test_differential.py`` replays
them on nnabla_jit, ``known`` lists the differences left, each with its reason."""
