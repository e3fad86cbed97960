"""Differential privacy end to end on the in-process grid: noise, accounting, budgets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from interrupt import Interrupt, stop_in_epoch

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.data.domain import bundled_domain
from flwr_vflgan.gan.plain import PlainVFLGAN
from flwr_vflgan.gan.schedule import Schedule
from flwr_vflgan.privacy import GaussianSteps, Sampling, epsilon, plan_privacy
from flwr_vflgan.runtime.party_data import DataSpec, all_blocks
from flwr_vflgan.simulations.config import OutputConfig, RunSpec, RuntimeConfig
from flwr_vflgan.simulations.families import run_experiment
from flwr_vflgan.simulations.pipeline import Evaluator
from flwr_vflgan.strategies import InProcessGrid, RunStopped, VFLGANStrategy

SHARED = 4242
ROWS = 640  # adult_small


def _grid(n: int, **extra: object) -> InProcessGrid:
    nodes = [{"partition-id": i, "shared-seed": SHARED, **extra} for i in range(n)]
    return InProcessGrid(make_client_app(), nodes)


def _config(dp: dict, variant: str = "vflgan", **train: object) -> VFLGANConfig:
    return VFLGANConfig.from_dict(
        {"variant": variant, "train": {"epochs": 2, "eval_rows": 200, **train}, "dp": dp}
    )


def _run(spec: DataSpec, config: VFLGANConfig, grid: InProcessGrid | None = None, **kw: object):
    evaluator = Evaluator(all_blocks(spec))
    strategy = VFLGANStrategy(
        config,
        n_parties=spec.n_parties,
        seed=0,
        data_spec=spec,
        evaluate_fn=evaluator.encoded_fd,
        publish_rows=100,
        **kw,  # type: ignore[arg-type]
    )
    return strategy.start(grid or _grid(spec.n_parties))


GAUSSIAN = {"mechanism": "vflgan_gaussian", "target_epsilon": 10.0, "delta": 1e-5}


@pytest.mark.parametrize("variant", ["vflgan", "vflgan_base"])
@pytest.mark.parametrize(
    "dp",
    [GAUSSIAN, {"mechanism": "dpsgd", "target_epsilon": 4.0, "delta": 1e-4, "max_grad_norm": 0.5}],
    ids=["vflgan_gaussian", "dpsgd"],
)
def test_calibrated_run_spends_at_most_its_budget(
    adult_small: Path, variant: str, dp: dict
) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    config = _config(dp, variant)
    result = _run(spec, config)
    schedule = Schedule(ROWS, 64, 5, 2)
    d_steps = schedule.d_steps_before(schedule.total_steps)
    assert result.budget_stop is None and result.steps == schedule.total_steps
    assert [p["party"] for p in result.privacy] == ["party 0", "party 1"]
    for party in result.privacy:
        assert party["steps"] == d_steps == 20
        assert party["mechanism"] == dp["mechanism"]
        # Recomputed independently from the published numbers: the accountant sees
        # sigma (first-layer mechanism) or sigma / 2 (DP-SGD, replace-one sensitivity 2C).
        multiplier = party["noise_multiplier"] / (2 if dp["mechanism"] == "dpsgd" else 1)
        spent = epsilon([GaussianSteps(ROWS, 64, multiplier, d_steps)], dp["delta"])
        assert party["epsilon"] == pytest.approx(spent)
        # Calibrated: within the budget and not wastefully below it.
        assert 0.97 * dp["target_epsilon"] < party["epsilon"] <= dp["target_epsilon"]
    # Choosing an epoch by its distance to the real data is outside the guarantee.
    assert result.published == "last"


def test_first_layer_noise_on_the_grid_matches_the_plain_loop(adult_small: Path) -> None:
    """Protocol and single-process loop clip and noise the same gradients with the same draws."""
    spec = DataSpec(source=str(adult_small), n_parties=2)
    config = _config(GAUSSIAN, max_steps=12, eval_every=0)
    blocks = all_blocks(spec)
    grid = _grid(2)
    VFLGANStrategy(config, n_parties=2, seed=5, data_spec=spec).start(grid)
    schedule = Schedule(ROWS, 64, 5, 2, 12)
    plan = plan_privacy(
        config.dp,
        dataset_size=ROWS,
        batch_size=64,
        planned_steps=Schedule(ROWS, 64, 5, 2, 12).d_steps_before(12),
    )
    plain = PlainVFLGAN(
        config, [b.encoder.spans for b in blocks], [b.encoded for b in blocks], SHARED, 5, plan
    )
    baseline = PlainVFLGAN(
        _config({}, max_steps=12, eval_every=0),
        [b.encoder.spans for b in blocks],
        [b.encoded for b in blocks],
        SHARED,
        5,
    )
    for step in range(schedule.total_steps):
        plain.step(step, schedule.kind(step))
        baseline.step(step, schedule.kind(step))
    for index, node in enumerate(sorted(grid.get_node_ids())):
        saved = np.frombuffer(grid.context(node).state["vflgan.flat"]["float32"], dtype=np.float32)
        np.testing.assert_allclose(saved, plain.parties[index].state.to_numpy(), atol=1e-6)
        # And the mechanism did change the training.
        assert not np.allclose(saved, baseline.parties[index].state.to_numpy(), atol=1e-4)


def test_a_fixed_noise_stops_training_before_the_budget_is_exceeded(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    dp = {**GAUSSIAN, "target_epsilon": 3.0, "noise_multiplier": 1.0}
    result = _run(spec, _config(dp, epochs=20))
    schedule = Schedule(ROWS, 64, 5, 20)
    allowed = plan_privacy(
        _config(dp).dp, dataset_size=ROWS, batch_size=64, planned_steps=1
    ).allowed_steps
    assert 0 < allowed < schedule.d_steps_before(schedule.total_steps)
    assert (
        result.budget_stop is not None and f"allows {allowed} discriminator" in result.budget_stop
    )
    assert result.steps == schedule.last_step_within(allowed) < schedule.total_steps
    for party in result.privacy:
        assert party["steps"] == allowed
        assert party["epsilon"] <= 3.0
        over = epsilon([GaussianSteps(ROWS, 64, 1.0, allowed + 1)], 1e-5)
        assert over > 3.0  # one more step would have been too many
    assert len(result.synthetic) == 100


def test_a_party_refuses_a_step_over_its_budget(
    adult_small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that ignores the parties' allowances is stopped by the parties themselves."""
    import flwr_vflgan.strategies.vflgan as strategy_module

    monkeypatch.setattr(
        strategy_module, "budget_schedule", lambda schedule, allowed: (schedule, None)
    )
    spec = DataSpec(source=str(adult_small), n_parties=2)
    dp = {**GAUSSIAN, "target_epsilon": 3.0, "noise_multiplier": 1.0}
    with pytest.raises(RunStopped, match=r"privacy budget: party 'party \d' would reach epsilon"):
        _run(spec, _config(dp, epochs=20, eval_every=0))


def test_bad_privacy_settings_stop_the_run_with_the_reason(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    with pytest.raises(RunStopped, match=r"dp.delta=0.01 must be below 1/n = 0.00156"):
        _run(spec, _config({**GAUSSIAN, "delta": 0.01}))
    with pytest.raises(RunStopped, match="too small for even one discriminator step"):
        _run(spec, _config({**GAUSSIAN, "target_epsilon": 0.5, "noise_multiplier": 0.5}))


def test_dp_resume_counts_the_steps_already_spent(adult_small: Path, tmp_path: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    config = _config(GAUSSIAN, epochs=4)
    reference = _run(spec, config)

    ckpt = tmp_path / "ckpt"
    kwargs = {"checkpoint_dir": ckpt, "party_checkpoint_root": ckpt}
    with pytest.raises(Interrupt):
        _run(spec, config, progress=stop_in_epoch(3), **kwargs)
    resumed = _run(spec, config, **kwargs)
    assert resumed.resumed_from_step == 24
    pd.testing.assert_frame_equal(resumed.synthetic, reference.synthetic)
    assert resumed.privacy == reference.privacy
    assert resumed.privacy[0]["steps"] == Schedule(ROWS, 64, 5, 4).d_steps_before(48)


@pytest.mark.parametrize("mechanism", ["vflgan_gaussian", "dpsgd"])
def test_centralized_wgan_gp_records_its_spent_epsilon(
    adult_small: Path, tmp_path: Path, mechanism: str
) -> None:
    spec = RunSpec(
        algorithm=VFLGANConfig.from_dict(
            {
                "variant": "wgan_gp",
                "train": {"epochs": 2, "eval_rows": 300},
                "dp": {"mechanism": mechanism, "target_epsilon": 5.0, "delta": 1e-4},
            }
        ),
        data=DataSpec(source=str(adult_small), n_parties=2),
        runtime=RuntimeConfig(),
        output=OutputConfig(publish_rows=100, checkpoint=False, evaluate=False),
        seed=0,
        run_dir=tmp_path / "run",
    )
    metrics = run_experiment(spec)
    privacy = metrics["privacy"]
    assert privacy["mechanism"] == mechanism and privacy["delta"] == 1e-4
    expected = {"vflgan_gaussian": "first_layer", "dpsgd": "critic_updates"}[mechanism]
    assert privacy["guarantee"] == expected and privacy["covers"]
    assert any("encoders" in item for item in privacy["not_covered"])
    (holder,) = privacy["parties"]
    assert holder["party"] == "centralized" and holder["steps"] == 20
    assert 4.8 < privacy["epsilon"] == holder["epsilon"] <= 5.0
    assert metrics["published_generator"] == "last"


def test_the_noise_comes_from_each_partys_own_seed(adult_small: Path) -> None:
    """node_config noise-seed drives the DP noise: same seeds, same table; another, another."""
    spec = DataSpec(source=str(adult_small), n_parties=2)
    config = _config(GAUSSIAN, max_steps=12, eval_every=0)
    first = _run(spec, config, _grid(2, **{"noise-seed": 11}))
    again = _run(spec, config, _grid(2, **{"noise-seed": 11}))
    other = _run(spec, config, _grid(2, **{"noise-seed": 12}))
    pd.testing.assert_frame_equal(first.synthetic, again.synthetic)
    assert not first.synthetic.equals(other.synthetic)


def test_poisson_dp_sgd_sends_variable_batches_and_accounts_add_remove(adult_small: Path) -> None:
    from flwr.app import Message

    from flwr_vflgan.runtime import protocol as P

    spec = DataSpec(source=str(adult_small), n_parties=2)
    dp = {"mechanism": "dpsgd", "target_epsilon": 8.0, "delta": 1e-4, "sampling": "poisson"}
    config = _config(dp, epochs=1, eval_every=0)
    log: list[Message] = []
    grid = InProcessGrid(
        make_client_app(),
        [{"partition-id": i, "shared-seed": SHARED} for i in range(2)],
        observer=log.append,
    )
    result = _run(spec, config, grid)
    steps = [m for m in log if m.metadata.message_type == P.STEP and m.metadata.reply_to_message_id]
    sizes: dict[str, list[int]] = {}
    schedule = Schedule(ROWS, 64, 5, 1)
    for m in steps:
        config = m.content[P.CONFIG]
        if config["forward_count"] and schedule.kind(config["forward_start"]) == "d":
            sizes.setdefault(m.metadata.group_id, []).append(config["batch_rows"][0])
    per_step = list(sizes.values())
    assert len(per_step) == 10  # one epoch: 640 // 64 D steps
    assert all(len(set(pair)) == 1 for pair in per_step)  # the parties agree on every batch
    assert len({pair[0] for pair in per_step}) > 1  # and the size varies around 64
    assert 30 < np.mean([pair[0] for pair in per_step]) < 100
    for party in result.privacy:
        assert party["accountant"] == "rdp-poisson" and party["steps"] == 10
        expected = epsilon(
            [GaussianSteps(ROWS, 64, party["noise_multiplier"], 10, Sampling.POISSON)], 1e-4
        )
        assert party["epsilon"] == pytest.approx(expected) and party["epsilon"] <= 8.0


@pytest.mark.parametrize(
    "dp",
    [GAUSSIAN, {"mechanism": "dpsgd", "target_epsilon": 4.0, "delta": 1e-4, "max_grad_norm": 0.5}],
    ids=["vflgan_gaussian", "dpsgd"],
)
def test_k_steps_per_exchange_release_exactly_what_one_step_per_exchange_releases(
    adult_small: Path, dp: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mechanism runs once per discriminator step whatever K: counted at the mechanism
    itself, and in each party's own account of its spend."""
    import flwr_vflgan.privacy.updates as updates

    calls: list[tuple[int, int]] = []
    for cls in (updates.FirstLayerUpdate, updates.PerSampleUpdate):
        original = cls.__call__

        def spy(self, *args, _original=original, **kwargs):  # type: ignore[no-untyped-def]
            calls.append((id(self), args[-1]))  # the step number is the last argument
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__call__", spy)
    spec = DataSpec(source=str(adult_small), n_parties=2)
    privacy, released = {}, {}
    for k in (1, 4):
        calls.clear()
        result = _run(spec, _config(dp, steps_per_exchange=k))
        privacy[k] = result.privacy
        released[k] = sorted(step for _, step in calls)
    schedule = Schedule(ROWS, 64, 5, 2)
    d_steps = [t for t in range(schedule.total_steps) if schedule.kind(t) == "d"]
    # Two parties, each applies its mechanism once per discriminator step.
    assert released[1] == released[4] == sorted(d_steps * 2)
    assert privacy[4] == privacy[1]
    assert all(p["steps"] == len(d_steps) for p in privacy[4])


def test_a_budget_cut_inside_a_block_stops_at_the_same_step(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)
    # sigma 2 allows 26 discriminator steps of 640 rows at epsilon 3: training stops after
    # 31 steps (26 D + 5 G), inside the exchange of steps 29-33 at K = 5 (epochs of 12).
    dp = {**GAUSSIAN, "target_epsilon": 3.0, "noise_multiplier": 2.0}
    one = _run(spec, _config(dp, epochs=20, eval_every=0))
    five = _run(spec, _config(dp, epochs=20, eval_every=0, steps_per_exchange=5))
    assert one.steps == Schedule(ROWS, 64, 5, 20).last_step_within(26) == 31
    assert five.budget_stop == one.budget_stop is not None
    assert five.steps == one.steps and five.privacy == one.privacy
    assert five.exchanges < one.exchanges


END_TO_END = {"mechanism": "end_to_end", "target_epsilon": 8.0, "delta": 1e-4, "max_grad_norm": 0.5}


def _public(spec_source: Path, n_parties: int = 2) -> DataSpec:
    domain = bundled_domain("adult")
    assert domain is not None
    return DataSpec(source=str(spec_source), n_parties=n_parties, domain=domain.to_mapping())


@pytest.mark.parametrize(
    ("variant", "sampling"),
    [
        ("vflgan", "without_replacement"),
        ("vflgan_base", "without_replacement"),
        ("vflgan", "poisson"),
    ],
)
def test_end_to_end_noises_the_server_and_accounts_every_part_jointly(
    adult_small: Path, variant: str, sampling: str
) -> None:
    """dp=end_to_end: the server reports its own DP-SGD on D_s beside the parties, all with
    one noise multiplier, and every epsilon is the joint one of the M + 1 releases."""
    dp = {**END_TO_END, "sampling": sampling}
    result = _run(_public(adult_small), _config(dp, variant))
    sensitivity = 2 if sampling == "without_replacement" else 1
    assert [p["party"] for p in result.privacy] == ["party 0", "party 1", "server"]
    assert len({p["noise_multiplier"] for p in result.privacy}) == 1
    for holder in result.privacy:
        assert holder["mechanism"] == "end_to_end" and holder["parts"] == 3
        assert holder["steps"] == 20
        # Recomputed independently: three releases of sensitivity 2C (replace-one) or C
        # (Poisson, add/remove-one) and noise sigma C.
        multiplier = holder["noise_multiplier"] / (sensitivity * 3**0.5)
        spent = epsilon([GaussianSteps(ROWS, 64, multiplier, 20, Sampling(sampling))], 1e-4)
        assert holder["epsilon"] == pytest.approx(spent)
        assert 0.97 * 8.0 < holder["epsilon"] <= 8.0
    assert len(result.synthetic) == 100 and result.published == "last"


def test_end_to_end_refuses_an_encoder_fitted_on_the_rows(adult_small: Path) -> None:
    spec = DataSpec(source=str(adult_small), n_parties=2)  # no public domain
    with pytest.raises(RunStopped, match="encoder built from public metadata, but it was fitted"):
        _run(spec, _config(END_TO_END))


def test_end_to_end_centralized_wgan_gp(adult_small: Path, tmp_path: Path) -> None:
    def spec(data: DataSpec) -> RunSpec:
        return RunSpec(
            algorithm=_config(END_TO_END, "wgan_gp"),
            data=data,
            runtime=RuntimeConfig(),
            output=OutputConfig(publish_rows=100, checkpoint=False, evaluate=False),
            seed=0,
            run_dir=tmp_path / f"run-{data.domain is not None}",
        )

    metrics = run_experiment(spec(_public(adult_small)))
    privacy = metrics["privacy"]
    assert privacy["guarantee"] == "end_to_end"
    (holder,) = privacy["parties"]
    assert holder["parts"] == 1 and 0.97 * 8.0 < holder["epsilon"] <= 8.0
    with pytest.raises(RunStopped, match="fitted on the rows"):
        run_experiment(spec(DataSpec(source=str(adult_small), n_parties=2)))


def test_batch_masking_sends_b_hat_rows_and_accounts_against_the_parties(
    adult_small: Path,
) -> None:
    """Paper 000's batch masking through real Messages: every discriminator step carries
    B_hat rows per party (generator steps B), and each party reports its guarantee against
    the others from the batches it can count; K = 4 releases exactly what K = 1 does."""
    from flwr.app import Message

    from flwr_vflgan.privacy.masking import against_parties, max_appearances
    from flwr_vflgan.runtime import protocol as P

    spec = DataSpec(source=str(adult_small), n_parties=2)
    masked = {**GAUSSIAN, "masked_batch_size": 256}
    log: list[Message] = []
    grid = InProcessGrid(
        make_client_app(),
        [{"partition-id": i, "shared-seed": SHARED} for i in range(2)],
        observer=log.append,
    )
    result = _run(spec, _config(masked, epochs=1, eval_every=0), grid)
    schedule = Schedule(ROWS, 64, 5, 1)
    rows = {"d": set(), "g": set()}
    for m in log:
        if m.metadata.message_type != P.STEP or not m.metadata.reply_to_message_id:
            continue
        config = m.content[P.CONFIG]
        if not config["forward_count"]:
            continue  # the last reply only applies
        for offset, count in enumerate(config["batch_rows"]):
            rows[schedule.kind(config["forward_start"] + offset)].add(count)
    assert rows == {"d": {256}, "g": {64}}
    d_steps = [t for t in range(schedule.total_steps) if schedule.kind(t) == "d"]
    plan = plan_privacy(
        _config(masked, epochs=1).dp, dataset_size=ROWS, batch_size=64, planned_steps=10
    )
    expected = against_parties(plan, 256, max_appearances(SHARED, d_steps, ROWS, 256))
    for party in result.privacy:
        assert party["steps"] == 10 and party["epsilon"] <= 10.0
        assert party["against_parties"] == pytest.approx(expected)
        assert party["against_parties"]["masked"] is True
    blocked = _run(spec, _config(masked, epochs=1, eval_every=0, steps_per_exchange=4))
    assert blocked.privacy == result.privacy
    plain = _run(spec, _config(GAUSSIAN, epochs=1, eval_every=0))
    assert all(p["against_parties"]["masked"] is False for p in plain.privacy)


def test_extra_generator_steps_cost_no_privacy(adult_small: Path) -> None:
    """dp=end_to_end with three generator steps per discriminator step: the same 20
    discriminator steps, the same noise and the same epsilon as one generator step, over
    twice the steps of training."""
    spec = _public(adult_small)
    one = _run(spec, _config(END_TO_END, n_critic=1))
    three = _run(spec, _config(END_TO_END, n_critic=1, generator_steps=3))
    assert one.steps == 40 and three.steps == 80
    for a, b in zip(one.privacy, three.privacy, strict=True):
        assert b["steps"] == a["steps"] == 20
        assert b["noise_multiplier"] == a["noise_multiplier"]
        assert b["epsilon"] == pytest.approx(a["epsilon"])
