"""attngraph.train.distributed: a world of one in this process, and 2-3 ranks under mpiexec (tests/mpi.py)."""
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from attngraph.errors import DistributedError
from attngraph.train import distributed
from tests.mpi import launch, requires_mpi

RANKS = Path(__file__).parent / "ranks"


def test_a_world_of_one_returns_its_inputs():
    world = distributed.SELF
    assert (world.rank, world.size) == (0, 1)
    x = np.arange(3.0)
    assert world.allreduce_sum(x, "sum") is x and world.allgather(5, "gather") == [5]
    assert world.shard(7) == slice(0, 7)
    grads = [np.ones(2), None]
    assert distributed.GradientBuckets(world, [((2,), np.float64), None]).reduce(grads, "reduce") == grads


def test_without_a_launcher_the_default_world_is_one(monkeypatch):
    for name in distributed.LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert distributed.world() is distributed.SELF and distributed.as_world(None) is distributed.SELF


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_shards_cover_the_items_once_and_differ_by_at_most_one(size):
    parts = [distributed.World.__new__(distributed.World) for _ in range(size)]
    for rank, part in enumerate(parts):
        part.rank, part.size = rank, size
    slices = [part.shard(11) for part in parts]
    assert [i for s in slices for i in range(11)[s]] == list(range(11))
    assert max(s.stop - s.start for s in slices) - min(s.stop - s.start for s in slices) <= 1


def test_buckets_fill_up_to_their_size_and_split_on_dtype():
    like = [((4,), np.float32), ((2,), np.float32), None, ((8,), np.float32), ((1,), np.float64), ((2,), np.float64),
            ((1,), np.float64)]
    buckets = distributed.GradientBuckets(distributed.SELF, like, bucket_bytes=24)
    assert buckets.layout() == [[0, 1], [3], [4, 5], [6]]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="timeout"):
        distributed.World(timeout=0)
    with pytest.raises(ValueError, match="bucket_bytes"):
        distributed.GradientBuckets(distributed.SELF, [], bucket_bytes=0)
    with pytest.raises(TypeError, match="comm"):
        distributed.as_world("world")


@requires_mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_collectives_sum_over_the_ranks(ranks):
    result = launch(RANKS / "world.py", ranks, ["sums"], timeout=60)
    assert result.returncode == 0, result.output
    assert sorted(re.findall(r"rank (\d+): ok", result.output)) == [str(r) for r in range(ranks)]


@requires_mpi
def test_rank_0_compiles_first_then_the_others_together(tmp_path):
    """What keeps ranks from writing one numba cache entry at once (the Trainer's first step, update, evaluation)."""
    result = launch(RANKS / "world.py", 3, ["in_turn", tmp_path / "log"], timeout=60)
    assert result.returncode == 0, result.output
    lines = (tmp_path / "log").read_text().splitlines()
    assert lines[:2] == ["start 0", "end 0"] and sorted(lines[2:]) == ["end 1", "end 2", "start 1", "start 2"]


@requires_mpi
def test_a_rank_that_raises_brings_the_world_down_with_its_error_printed_once():
    result = launch(RANKS / "world.py", 2, ["raises"], timeout=60, runner=False)     # the library's hook alone
    assert result.returncode != 0
    assert result.output.count("RuntimeError: rank 1 breaks on purpose") == 1, result.output
    assert "rank 1 failed; aborting all ranks" in result.output


@requires_mpi
def test_a_stalled_collective_names_the_rank_and_the_step():
    result = launch(RANKS / "world.py", 2, ["stalls"], timeout=60, runner=False)
    assert result.returncode != 0
    assert "CollectiveTimeout: rank 0 of 2: step 7: the gradient all-reduce waited more than 1 s" in result.output, \
        result.output


@requires_mpi
@pytest.mark.parametrize("ranks, accumulate", [(1, 2), (2, 1), (3, 1)])
def test_ranks_take_the_step_of_one_process_with_their_micro_batches(tmp_path, ranks, accumulate):
    """Bit for bit for 2 ranks, a=1 (the script says what it compares)."""
    result = launch(RANKS / "trainer.py", ranks, ["same", tmp_path, accumulate], timeout=150)
    assert result.returncode == 0, result.output
    assert sorted(re.findall(r"rank (\d+): same", result.output)) == [str(r) for r in range(ranks)], result.output


DIFFERENCES = {
    "steps": "the ranks disagree on the steps: rank 0 has 2, rank 1 has 3",
    "step": "the ranks disagree on the step: rank 0 has 0, rank 1 has 1",
    "data": "the start-up check of the trainer: the ranks disagree on the gradient schedule: rank 0 has "
            "{'accumulate': 1,",
    "model": "the start-up check of the trainer: the ranks disagree on the parameters: rank 0 has "
             "[('0.weight', (4, 16)",
    "version": "the start-up check of the trainer: the ranks disagree on the attngraph version: rank 0 has '0.1.0', "
               "rank 1 has '9.9.9'",
}


@requires_mpi
def test_ranks_that_differ_get_an_error_naming_the_difference_on_every_rank(tmp_path):
    result = launch(RANKS / "trainer.py", 2, ["differ", tmp_path], timeout=120)
    assert result.returncode == 0, result.output
    errors = re.findall(r"rank (\d): (\w+): DistributedError: (.*?)(?=rank \d: \w+: |\n|$)", result.output)
    assert sorted((case, rank) for rank, case, _ in errors) == sorted((case, r) for case in DIFFERENCES
                                                                      for r in "01"), result.output
    for rank, case, message in errors:
        assert DIFFERENCES[case] in message, (rank, case, message)


@requires_mpi
@pytest.mark.cuda
def test_ranks_training_on_cuda_stage_their_gradients_through_the_host(tmp_path):
    """On numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=0 set for the test runs it on a GPU), against one CPU process."""
    result = launch(RANKS / "trainer.py", 2, ["cuda", tmp_path], timeout=240,
                    env={"NUMBA_ENABLE_CUDASIM": os.environ.get("NUMBA_ENABLE_CUDASIM", "1")})
    assert result.returncode == 0, result.output
    assert sorted(re.findall(r"rank (\d+): same", result.output)) == ["0", "1"], result.output


def test_a_launched_process_without_mpi_is_refused_rather_than_training_alone(monkeypatch):
    monkeypatch.setattr(distributed, "_world", None)
    monkeypatch.setenv("PMI_RANK", "0")
    monkeypatch.setitem(sys.modules, "mpi4py", None)            # import fails as without the package
    with pytest.raises(DistributedError, match="an MPI launcher started this process, but mpi4py cannot load MPI"):
        distributed.init()
    monkeypatch.delenv("PMI_RANK")
    assert distributed.init().size == 1


def test_a_malformed_timeout_variable_is_named(monkeypatch):
    monkeypatch.setattr(distributed, "_world", None)
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setenv("ATTNGRAPH_MPI_TIMEOUT", "soon")
    with pytest.raises(DistributedError, match="ATTNGRAPH_MPI_TIMEOUT must be a number of seconds, got 'soon'"):
        distributed.init()


@requires_mpi
def test_a_trainer_whose_rank_stalls_reports_the_rank_and_step_and_ends():
    result = launch(RANKS / "trainer.py", 2, ["stalls", "."], timeout=60, runner=False)
    assert result.returncode != 0
    assert "CollectiveTimeout: rank 0 of 2: step 2: the agreement to stop waited more than 2 s" in result.output, \
        result.output
