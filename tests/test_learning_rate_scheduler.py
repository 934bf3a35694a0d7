"""Learning-rate schedulers: nnabla's formulas, and values recorded from nnabla 1.39."""
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import nnabla_jit.solvers as S
from nnabla_jit.utils import learning_rate_scheduler as L

# (scheduler, {iteration: the rate nnabla 1.39 returns}), recorded with nnabla itself.
NNABLA_VALUES = [
    (lambda: L.PolynomialScheduler(0.1, 10, 2.0),
     {0: 0.1, 1: 0.08100000000000002, 3: 0.048999999999999995, 10: 0.0, 11: 0.0010000000000000018,
      2.5: 0.05625}),
    (lambda: L.PolynomialScheduler(0.1, 10, 0.5),
     {1: 0.09486832980505139, 9: 0.03162277660168379, 2.5: 0.08660254037844387}),
    (lambda: L.CosineScheduler(0.1, 10),
     {0: 0.1, 1: 0.09755282581475769, 5: 0.05, 9: 0.0024471741852423235, 10: 0.0,
      11: 0.0024471741852423235, 15: 0.04999999999999999, 2.5: 0.08535533905932738}),
    (lambda: L.ExponentialScheduler(0.1, 0.5),
     {0: 0.1, 1: 0.05, 10: 9.765625e-05, 2.5: 0.025}),
    (lambda: L.ExponentialScheduler(0.1, 0.5, 3),
     {0: 0.1, 2: 0.1, 3: 0.05, 8: 0.025, 9: 0.0125, 15: 0.003125}),
    (lambda: L.StepScheduler(0.1, 0.5, [2, 5, 5, 8]),
     {0: 0.1, 1: 0.1, 2: 0.05, 4: 0.05, 5: 0.0125, 8: 0.00625, 15: 0.00625, 2.5: 0.05}),
    (lambda: L.StepScheduler(0.1, 0.5, [8, 2]),
     {1: 0.1, 2: 0.05, 7: 0.05, 8: 0.025}),
    (lambda: L.LinearWarmupScheduler(L.CosineScheduler(0.1, 10), 4),
     {0: 0.025, 1: 0.048776412907378844, 2: 0.06783813728906053, 3: 0.07938926261462366,
      4: 0.06545084971874737, 2.5: 0.07468592167691146}),
    (lambda: L.LinearWarmupScheduler(L.ExponentialScheduler(0.1, 0.9), 0),
     {0: 0.1, 1: 0.09000000000000001, 2: 0.08100000000000002}),
]


@pytest.mark.parametrize("make,values", NNABLA_VALUES)
def test_values_equal_nnabla_s(make, values):
    scheduler = make()
    for iteration, expected in values.items():
        assert scheduler.get_learning_rate(iteration) == expected, iteration


def test_polynomial_past_max_iter_follows_the_formula():
    # nnabla returns Python's complex power of the negative base here; so do we.
    value = L.PolynomialScheduler(0.1, 10, 0.5).get_learning_rate(11)
    assert isinstance(value, complex) and value == pytest.approx(0.031622776601683805j)


@given(init_lr=st.floats(1e-4, 1.0), max_iter=st.integers(1, 1000), power=st.floats(0.1, 4.0),
       gamma=st.floats(0.1, 0.99), interval=st.integers(1, 50), data=st.data())
def test_formulas(init_lr, max_iter, power, gamma, interval, data):
    it = data.draw(st.integers(0, max_iter))
    assert L.PolynomialScheduler(init_lr, max_iter, power).get_learning_rate(it) == pytest.approx(
        init_lr * (1 - it / max_iter) ** power, rel=1e-12, abs=1e-300)
    assert L.CosineScheduler(init_lr, max_iter).get_learning_rate(it) == pytest.approx(
        init_lr * 0.5 * (1 + math.cos(math.pi * it / max_iter)), rel=1e-12, abs=1e-17)
    assert L.ExponentialScheduler(init_lr, gamma, interval).get_learning_rate(it) == pytest.approx(
        init_lr * gamma ** (it // interval), rel=1e-12)
    steps = sorted(data.draw(st.lists(st.integers(0, max_iter), max_size=5)))
    assert L.StepScheduler(init_lr, gamma, steps).get_learning_rate(it) == pytest.approx(
        init_lr * gamma ** sum(it >= s for s in steps), rel=1e-12)
    warmup = data.draw(st.integers(0, max_iter))
    base = L.CosineScheduler(init_lr, max_iter)
    expected = base.get_learning_rate(it) * (min(1.0, (it + 1) / warmup) if warmup else 1.0)
    assert L.LinearWarmupScheduler(base, warmup).get_learning_rate(it) == pytest.approx(
        expected, rel=1e-12, abs=1e-17)


def test_schedules_drive_a_solver():
    solver = S.Momentum(lr=0.1)
    scheduler = L.StepScheduler(0.1, 0.1, [2])
    rates = []
    for i in range(4):
        solver.set_learning_rate(scheduler.get_learning_rate(i))
        rates.append(solver.learning_rate())
    assert rates == pytest.approx([0.1, 0.1, 0.01, 0.01])


def test_user_scheduler_and_errors():
    class Halving(L.BaseLearningRateScheduler):
        def get_learning_rate(self, iter):
            return 1.0 / 2 ** iter

    assert L.LinearWarmupScheduler(Halving(), 2).get_learning_rate(0) == 0.5
    with pytest.raises(NotImplementedError, match="does not define get_learning_rate"):
        L.BaseLearningRateScheduler().get_learning_rate(0)
    with pytest.raises(TypeError, match="LinearWarmupScheduler"):
        L.LinearWarmupScheduler(0.1, 10)
    with pytest.raises(ValueError, match="CosineScheduler.*max_iter"):
        L.CosineScheduler(0.1, 0)
    with pytest.raises(ValueError, match="ExponentialScheduler.*iter_interval"):
        L.ExponentialScheduler(0.1, 0.5, 0)
