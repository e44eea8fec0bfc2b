"""Learning-rate schedules at chosen steps, and their configs."""
import json
import math

import pytest

from attngraph.train import schedules
from attngraph.train.schedules import Constant, CosineDecay, LinearWarmup, Noam


def test_constant():
    assert [Constant(0.1)(t) for t in (1, 1000)] == [0.1, 0.1]


def test_linear_warmup():
    schedule = LinearWarmup(1.0, warmup=10)
    assert [schedule(t) for t in (1, 5, 10, 11, 500)] == pytest.approx([0.1, 0.5, 1.0, 1.0, 1.0])


def test_cosine_decay_with_warmup():
    schedule = CosineDecay(1.0, total=110, warmup=10, min_lr=0.1)
    assert schedule(5) == pytest.approx(0.5)
    assert schedule(10) == pytest.approx(1.0)
    assert schedule(35) == pytest.approx(0.1 + 0.9 * (1 + math.cos(math.pi / 4)) / 2)    # 0.8682
    assert schedule(60) == pytest.approx(0.55)
    assert schedule(110) == pytest.approx(0.1) and schedule(200) == pytest.approx(0.1)
    assert CosineDecay(2.0, total=4)(1) == pytest.approx(2.0 * (1 + math.cos(math.pi / 4)) / 2)
    with pytest.raises(ValueError, match="warmup < total"):
        CosineDecay(1.0, total=10, warmup=10)


def test_noam_is_the_transformer_schedule():
    schedule = Noam(d_model=512, warmup=4000)
    assert schedule(4000) == pytest.approx(6.9877e-4, rel=1e-4)           # the peak: (512 · 4000)^-½
    assert schedule(16000) == pytest.approx(schedule(4000) / 2)          # then 1/√t
    assert schedule(1) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)      # 1.747e-7
    assert schedule(2000) == pytest.approx(schedule(4000) / 2)           # linear warm-up
    assert Noam(64, warmup=100, factor=2.0)(100) == pytest.approx(2 / math.sqrt(6400))


def test_steps_count_from_one():
    with pytest.raises(ValueError, match="from 1"):
        Constant(0.1)(0)


@pytest.mark.parametrize("schedule", [Constant(0.1), LinearWarmup(0.1, 5), CosineDecay(0.1, 50, 5, 0.01),
                                      Noam(128, 400, 2.0)])
def test_config_round_trips_through_json(schedule):
    config = json.loads(json.dumps(schedule.config()))
    assert config["type"] == type(schedule).__name__
    assert schedules.from_config(config) == schedule
    assert repr(schedule).startswith(type(schedule).__name__ + "(")


def test_unknown_schedule_type():
    with pytest.raises(ValueError, match="unknown schedule type 'Step'"):
        schedules.from_config({"type": "Step", "lr": 0.1})
