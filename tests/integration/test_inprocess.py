"""VFLGAN end to end on the in-process grid: real Flower Messages, Contexts and records."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from interrupt import Interrupt, stop_in_epoch

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.gan.vflgan import PartyTrainer
from flwr_vflgan.runtime.party_data import DataSpec, all_blocks
from flwr_vflgan.simulations.pipeline import Evaluator
from flwr_vflgan.strategies import InProcessGrid, VFLGANStrategy

SHARED = 4242


def _grid(n: int, **extra: object) -> InProcessGrid:
    nodes = [{"partition-id": i, "shared-seed": SHARED, **extra} for i in range(n)]
    return InProcessGrid(make_client_app(), nodes)


def _run(spec: DataSpec, config: VFLGANConfig, seed: int = 0, **kwargs: object):
    blocks = all_blocks(spec)
    evaluator = Evaluator(blocks)
    strategy = VFLGANStrategy(
        config,
        n_parties=spec.n_parties,
        seed=seed,
        data_spec=spec,
        evaluate_fn=evaluator.encoded_fd,
        **kwargs,  # type: ignore[arg-type]
    )
    return strategy.start(_grid(spec.n_parties)), evaluator, blocks


@pytest.mark.parametrize("variant", ["vflgan", "vflgan_base"])
def test_frechet_distance_falls_well_below_its_value_at_initialisation(
    adult_4k: Path, variant: str
) -> None:
    spec = DataSpec(source=str(adult_4k), n_parties=2)
    # 16 epochs: with the first-part penalty (the default) the FD of this 4,000-row table
    # falls more slowly at first (measured: 10.6 -> 6.4 after 8 epochs, 4.6 after 16).
    config = VFLGANConfig.from_dict(
        {"variant": variant, "train": {"epochs": 16, "eval_rows": 4000}}
    )
    blocks = all_blocks(spec)
    evaluator = Evaluator(blocks)
    # The same generators as the run's at step 0 (same config, seeds and party index).
    initial = [
        PartyTrainer(config, b.encoder.spans, b.encoded, SHARED, i).generate(4000, 1).numpy()
        for i, b in enumerate(blocks)
    ]
    fd_initial = evaluator.encoded_fd(initial)["fd"]
    result, _, _ = _run(spec, config)
    assert result.best_fd is not None
    assert result.best_fd < 0.5 * fd_initial, (fd_initial, result.history)
    # Model selection keeps the best epoch, as the paper does.
    assert result.best_fd == min(h["fd"] for h in result.history)
    assert result.best_epoch == min(result.history, key=lambda h: h["fd"])["epoch"]
    # One exchange per step (each fuses the apply of step t with the forward of t+1),
    # plus setup, the last step's apply (fused with the final evaluation) and publication.
    assert result.exchanges == result.steps + 3


def test_published_table_has_the_real_columns_rows_and_categories(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=3)
    config = VFLGANConfig.from_dict({"train": {"epochs": 2, "eval_rows": 200}})
    result, _, blocks = _run(spec, config, publish_rows=333)
    table = result.synthetic
    assert len(table) == 333
    real = pd.concat([b.frame for b in blocks], axis=1)
    assert list(table.columns) == list(real.columns)
    for column in real.columns:
        if real[column].dtype.kind in "iu":
            assert table[column].dtype.kind in "iu", column
            assert table[column].between(real[column].min(), real[column].max()).all(), column
        elif real[column].dtype.kind not in "f":
            assert set(table[column].dropna()) <= set(real[column].dropna()), column


def test_same_seed_same_table_and_another_seed_another(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    config = VFLGANConfig.from_dict({"train": {"epochs": 1, "max_steps": 8, "eval_rows": 100}})
    first, _, _ = _run(spec, config, seed=3, publish_rows=200)
    second, _, _ = _run(spec, config, seed=3, publish_rows=200)
    pd.testing.assert_frame_equal(first.synthetic, second.synthetic)
    other, _, _ = _run(spec, config, seed=4, publish_rows=200)
    assert not first.synthetic.equals(other.synthetic)


@pytest.mark.parametrize(("k", "average"), [(1, None), (5, None), (1, 0.5)])
def test_interrupted_run_resumes_to_the_same_result(
    adult_small: Path, tmp_path: Path, k: int, average: float | None
) -> None:
    """Also with 5 steps per exchange (an epoch of 12 steps is blocks of 5, 5 and 2), and
    with averaged generators (the average is part of each party's checkpoint)."""
    spec = DataSpec(source=str(adult_small), n_parties=2)
    train = {"epochs": 4, "eval_rows": 200, "steps_per_exchange": k}
    config = VFLGANConfig.from_dict({"train": {**train, "generator_average": average}})
    reference, _, _ = _run(spec, config, publish_rows=150)

    ckpt = tmp_path / "ckpt"
    kwargs = {"publish_rows": 150, "checkpoint_dir": ckpt, "party_checkpoint_root": ckpt}
    with pytest.raises(Interrupt):
        _run(spec, config, progress=stop_in_epoch(3), **kwargs)
    assert sorted(p.name for p in ckpt.glob("server-*.npz")) == ["server-12.npz", "server-24.npz"]
    resumed, _, _ = _run(spec, config, **kwargs)
    assert resumed.resumed_from_step == 24
    pd.testing.assert_frame_equal(resumed.synthetic, reference.synthetic)
    assert [h["fd"] for h in resumed.history] == [h["fd"] for h in reference.history]
    assert resumed.best_epoch == reference.best_epoch


@pytest.mark.parametrize("average", [None, 0.5])
def test_training_on_the_grid_matches_the_plain_loop(
    adult_small: Path, average: float | None
) -> None:
    """The Flower path (messages, state saved and restored every message) does the plain
    math, the generators' averages (train.generator_average) included."""
    from flwr_vflgan.gan.plain import PlainVFLGAN
    from flwr_vflgan.gan.schedule import Schedule

    spec = DataSpec(source=str(adult_small), n_parties=2)
    train = {"epochs": 1, "max_steps": 12, "eval_every": 0, "generator_average": average}
    config = VFLGANConfig.from_dict({"train": train})
    blocks = all_blocks(spec)
    grid = _grid(2)
    VFLGANStrategy(config, n_parties=2, seed=5, data_spec=spec).start(grid)
    plain = PlainVFLGAN(
        config, [b.encoder.spans for b in blocks], [b.encoded for b in blocks], SHARED, 5
    )
    schedule = Schedule(len(blocks[0].frame), 64, 5, 1, 12)
    for step in range(schedule.total_steps):
        plain.step(step, schedule.kind(step))
    for index, node in enumerate(sorted(grid.get_node_ids())):
        saved = np.frombuffer(grid.context(node).state["vflgan.flat"]["float32"], dtype=np.float32)
        np.testing.assert_array_equal(saved, plain.parties[index].state.to_numpy())
    if average is not None:  # the average moved, and is not the generator
        party = plain.parties[0]
        assert party.average is not None and party.published is party.average.module
        moved = [
            not torch.equal(a, g)
            for a, g in zip(party.published.parameters(), party.generator.parameters(), strict=True)
        ]
        assert all(moved)


def test_wgan_gp_reference_trains_on_the_concatenated_table(
    adult_small: Path, tmp_path: Path
) -> None:
    from flwr_vflgan.simulations.config import OutputConfig, RunSpec, RuntimeConfig
    from flwr_vflgan.simulations.families import run_experiment

    spec = RunSpec(
        algorithm=VFLGANConfig.from_dict(
            {"variant": "wgan_gp", "train": {"epochs": 3, "eval_rows": 300}}
        ),
        data=DataSpec(source=str(adult_small), n_parties=2),
        runtime=RuntimeConfig(),
        output=OutputConfig(publish_rows=100, checkpoint=False),
        seed=0,
        run_dir=tmp_path / "run",
    )
    metrics = run_experiment(spec)
    assert metrics["algorithm"] == "wgan_gp" and metrics["steps"] == 36
    assert len(metrics["history"]) == 3 and np.isfinite(metrics["fd"])
    table = pd.read_csv(tmp_path / "run" / "synthetic.csv")
    assert len(table) == 100 and table.shape[1] == 15
    assert torch.get_num_threads() == 1


def test_mnist_pixels_split_between_parties_use_tanh_outputs() -> None:
    """Paper 000's image setting: pixels scaled to [-1, 1], tanh outputs, label with the last party."""
    datasets = Path(
        os.environ.get("FLWR_VFLGAN_DATA_DIR")
        or Path(__file__).resolve().parents[3] / "shared" / "datasets"
    )
    assert datasets.is_dir(), f"the shared datasets folder is missing: {datasets}"
    spec = DataSpec(
        source="mnist_5k", n_parties=2, numeric_scaling="minmax", data_dir=str(datasets)
    )
    config = VFLGANConfig.from_dict({"train": {"epochs": 1, "max_steps": 6, "eval_rows": 300}})
    result, _, blocks = _run(spec, config, publish_rows=50)
    assert [len(b.schema.names) for b in blocks] == [393, 392]
    assert {s.activation for s in blocks[0].encoder.spans} == {"tanh"}
    pixels = result.synthetic[[c for c in result.synthetic.columns if c.startswith("pixel_")]]
    assert pixels.shape == (50, 784)
    assert pixels.to_numpy().min() >= 0 and pixels.to_numpy().max() <= 255
    assert set(result.synthetic["label"]) <= set(range(10))


def test_k_steps_per_exchange_on_the_grid_match_the_local_loop(adult_small: Path) -> None:
    """Messages, packing and state restored every message change nothing at K = 4 either."""
    from flwr_vflgan.gan.exchanges import LocalVFLGAN
    from flwr_vflgan.gan.schedule import Schedule
    from flwr_vflgan.gan.vflgan import ServerTrainer

    spec = DataSpec(source=str(adult_small), n_parties=2)
    train = {"epochs": 2, "eval_every": 0, "steps_per_exchange": 4}
    config = VFLGANConfig.from_dict({"train": train})
    blocks = all_blocks(spec)
    grid = _grid(2)
    result = VFLGANStrategy(config, n_parties=2, seed=5, data_spec=spec).start(grid)
    schedule = Schedule(len(blocks[0].frame), 64, 5, 2)
    parties = [
        PartyTrainer(config, b.encoder.spans, b.encoded, SHARED, i) for i, b in enumerate(blocks)
    ]
    local = LocalVFLGAN(parties, ServerTrainer(config, 2, 5), schedule, 4)
    exchanges = local.blocks()
    # 12 steps per epoch in blocks of 4; setup, the last apply and publication on top.
    assert [b.count for b in exchanges] == [4, 4, 4] * 2
    assert result.steps == 24 and result.exchanges == len(exchanges) + 3
    for block in exchanges:
        local.run_block(block)
    for index, node in enumerate(sorted(grid.get_node_ids())):
        saved = np.frombuffer(grid.context(node).state["vflgan.flat"]["float32"], dtype=np.float32)
        np.testing.assert_array_equal(saved, parties[index].state.to_numpy())


def test_an_automatic_length_is_the_same_on_both_sides(adult_small: Path) -> None:
    """640 rows at batch 64, n_critic 5: an epoch is 10 + 2 = 12 steps, so train.epochs=null
    with train.min_steps=30 trains 3 epochs (36 steps); the parties derive the same
    schedule from the same settings (each refuses a step its schedule does not expect)."""
    spec = DataSpec(source=str(adult_small), n_parties=2)
    config = VFLGANConfig.from_dict({"train": {"epochs": None, "min_steps": 30, "eval_rows": 200}})
    result, _, _ = _run(spec, config)
    assert result.steps == 36
    assert [h["epoch"] for h in result.history] == [1, 2, 3]


def test_quantile_scaling_trains_in_its_encoding_and_measures_fd_in_papers(
    adult_small: Path,
) -> None:
    """dataset.numeric_scaling=quantile: the parties train on normal scores of their
    numbers, the FD is measured in paper 000's standardised encoding (as for every run),
    and the published numbers lie within the real ranges, integers whole."""
    from dataclasses import replace

    spec = DataSpec(source=str(adult_small), n_parties=2, numeric_scaling="quantile")
    config = VFLGANConfig.from_dict({"train": {"epochs": 2, "eval_rows": 300}})
    result, evaluator, blocks = _run(spec, config, publish_rows=200)
    assert all(b.encoder.numeric_scaling == "quantile" for b in blocks)  # type: ignore[union-attr]
    standard = Evaluator(all_blocks(replace(spec, numeric_scaling="standard")))
    np.testing.assert_allclose(evaluator.real.cov, standard.real.cov, atol=1e-12)
    assert evaluator.table_fd(result.synthetic) == pytest.approx(
        standard.table_fd(result.synthetic), rel=1e-9
    )
    # The real rows in the quantile encoding, decoded and re-encoded, are the real table
    # up to the interpolation between reference quantiles.
    assert evaluator.encoded_fd([b.encoded.numpy() for b in blocks])["fd"] < 1e-3
    table, real = result.synthetic, pd.read_csv(adult_small)
    for column in ("age", "hours-per-week", "capital-gain"):
        assert table[column].between(real[column].min(), real[column].max()).all()
        assert (table[column] == table[column].round()).all()


def test_mode_specific_normalisation_trains_in_ctgans_encoding_and_measures_fd_in_papers(
    adult_small: Path,
) -> None:
    """dataset.numeric_scaling=mode: each numeric column is a tanh scalar and a mode block
    on the wire-free side of the protocol, while the FD (and the best epoch) is measured in
    paper 000's standardised encoding, as for every other run."""
    from dataclasses import replace

    from flwr_vflgan.data.modes import ModeSpecificEncoder

    spec = DataSpec(source=str(adult_small), n_parties=2, numeric_scaling="mode")
    config = VFLGANConfig.from_dict({"train": {"epochs": 2, "eval_rows": 300}})
    result, evaluator, blocks = _run(spec, config, publish_rows=200)
    assert all(isinstance(b.encoder, ModeSpecificEncoder) for b in blocks)
    age = [s.activation for s in blocks[0].encoder.spans if s.column == "age"]
    assert age == ["tanh", "gumbel_softmax"]
    standard = Evaluator(all_blocks(replace(spec, numeric_scaling="standard")))
    np.testing.assert_allclose(evaluator.real.mean, standard.real.mean, atol=1e-12)
    np.testing.assert_allclose(evaluator.real.cov, standard.real.cov, atol=1e-12)
    assert evaluator.table_fd(result.synthetic) == pytest.approx(
        standard.table_fd(result.synthetic), rel=1e-9
    )
    # The real rows in CTGAN's encoding, decoded and re-encoded, are (almost) the real
    # table: only values beyond 3.96 sigma of their sampled mode are clipped.
    assert evaluator.encoded_fd([b.encoded.numpy() for b in blocks])["fd"] < 0.05
    assert result.best_epoch in (1, 2) and all(np.isfinite(h["fd"]) for h in result.history)
    table, real = result.synthetic, pd.read_csv(adult_small)
    assert len(table) == 200 and list(table.columns) == list(real.columns)
    for column in ("age", "hours-per-week", "capital-gain"):
        assert table[column].between(real[column].min(), real[column].max()).all()
        assert (table[column] == table[column].round()).all()


def test_several_generator_steps_per_critic_cycle_on_the_grid_match_the_local_loop(
    adult_small: Path,
) -> None:
    """train.generator_steps=3 with n_critic 1 and K = 4: the parties and the server derive
    the same step kinds (each refuses an unexpected one), the generators take three steps
    per discriminator step, and the Flower path does the local loop's math."""
    from flwr_vflgan.gan.exchanges import LocalVFLGAN
    from flwr_vflgan.gan.schedule import Schedule, StepKind
    from flwr_vflgan.gan.vflgan import ServerTrainer

    spec = DataSpec(source=str(adult_small), n_parties=2)
    train = {"epochs": 1, "eval_every": 0, "n_critic": 1, "generator_steps": 3}
    config = VFLGANConfig.from_dict({"train": {**train, "steps_per_exchange": 4}})
    blocks = all_blocks(spec)
    grid = _grid(2)
    result = VFLGANStrategy(config, n_parties=2, seed=5, data_spec=spec).start(grid)
    schedule = Schedule.of(len(blocks[0].frame), config.train)
    kinds = "".join(schedule.kind(t).value for t in range(schedule.total_steps))
    assert kinds == "dggg" * 10 and result.steps == 40
    assert schedule.steps_before(40, StepKind.GENERATOR) == 30
    parties = [
        PartyTrainer(config, b.encoder.spans, b.encoded, SHARED, i) for i, b in enumerate(blocks)
    ]
    local = LocalVFLGAN(parties, ServerTrainer(config, 2, 5), schedule, 4)
    for block in local.blocks():
        local.run_block(block)
    for index, node in enumerate(sorted(grid.get_node_ids())):
        saved = np.frombuffer(grid.context(node).state["vflgan.flat"]["float32"], dtype=np.float32)
        np.testing.assert_array_equal(saved, parties[index].state.to_numpy())
