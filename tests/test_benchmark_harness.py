"""The benchmark harness: every side takes one turn of two calls a round, and none keeps the same predecessor round
after round (a side's spinning threads slow the next one: JAX's, after its step)."""
import collections

from benchmarks.harness import compare


def test_each_side_takes_a_turn_of_two_calls_a_round_after_every_other():
    calls = []
    runs = {name: (lambda name=name: calls.append(name)) for name in ("attngraph", "torch", "compile", "jax")}
    timings = compare(runs, rounds=24)
    assert {name: (len(t.seconds), len(t.after_another)) for name, t in timings.items()} == dict.fromkeys(runs, (24, 24))
    timed = calls[2 * len(runs):]                         # after the warm-up call and the memory measurement
    assert timed[::2] == timed[1::2]                      # each turn's two calls back to back
    turns = timed[::2]
    rounds = [turns[i:i + len(runs)] for i in range(0, len(turns), len(runs))]
    assert all(sorted(r) == sorted(runs) for r in rounds)
    follows = collections.Counter((a, b) for r in rounds for a, b in zip(r, r[1:]))
    assert all(follows[a, b] > 0 for a in runs for b in runs if a != b)
    assert max(follows.values()) < 24 / 2
