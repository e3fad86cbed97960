"""Every DP run names what its epsilon covers (issue 22, part 3)."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import pytest

from flwr_vflgan.config import VFLGANConfig
from flwr_vflgan.privacy import DPConfig
from flwr_vflgan.privacy.guarantee import Guarantee, describe_guarantee
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.simulations.config import OutputConfig, RunSpec, RuntimeConfig
from flwr_vflgan.simulations.pipeline import privacy_rows
from flwr_vflgan.simulations.reporting import Reporter


def _dp(mechanism: str, **extra: object) -> DPConfig:
    return DPConfig(mechanism=mechanism, target_epsilon=1.0, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("variant", "mechanism", "guarantee"),
    [
        ("vflgan", "vflgan_gaussian", Guarantee.FIRST_LAYER),
        ("vflgan_base", "vflgan_gaussian", Guarantee.FIRST_LAYER),
        ("wgan_gp", "vflgan_gaussian", Guarantee.FIRST_LAYER),
        ("vflgan", "dpsgd", Guarantee.LOCAL_DISCRIMINATORS),
        ("vflgan_base", "dpsgd", Guarantee.LOCAL_DISCRIMINATORS),
        ("wgan_gp", "dpsgd", Guarantee.CRITIC_UPDATES),
        ("vtgan", "dpsgd", Guarantee.CRITIC_UPDATES),
        ("ctgan", "dpsgd", Guarantee.CRITIC_UPDATES),
    ],
)
def test_each_mechanism_names_its_guarantee(variant: str, mechanism: str, guarantee: Guarantee):
    statement = describe_guarantee(variant, _dp(mechanism))
    assert statement is not None and statement.guarantee is guarantee
    # No guarantee here covers preprocessing: every one says so.
    assert any("encoders" in item for item in statement.not_covered)
    assert statement.to_dict()["guarantee"] != "end_to_end"


@pytest.mark.parametrize("variant", ["vflgan", "vflgan_base", "wgan_gp"])
def test_end_to_end_covers_the_table_and_names_what_training_reveals(variant: str) -> None:
    statement = describe_guarantee(variant, _dp("end_to_end"))
    assert statement is not None and statement.guarantee is Guarantee.END_TO_END
    assert "public metadata" in statement.covers and "post-processing" in statement.covers
    assert not any("encoders" in item for item in statement.not_covered)
    assert any("cryptographically secure" in item for item in statement.not_covered)
    if variant != "wgan_gp":
        assert "D_s" in statement.covers
        assert any("see while training" in item for item in statement.not_covered)


def test_the_federated_holes_are_named() -> None:
    """The shared discriminator reads real-row features un-noised under both mechanisms."""
    for mechanism in ("vflgan_gaussian", "dpsgd"):
        statement = describe_guarantee("vflgan", _dp(mechanism))
        assert statement is not None
        assert any("shared discriminator D_s" in item for item in statement.not_covered)
    centralized = describe_guarantee("wgan_gp", _dp("dpsgd"))
    assert centralized is not None and len(centralized.not_covered) == 1  # the encoders only
    vtgan = describe_guarantee("vtgan", _dp("dpsgd"))
    assert vtgan is not None and any("in the clear" in item for item in vtgan.not_covered)


def test_choosing_the_epoch_by_fd_is_listed_as_not_covered() -> None:
    plain = describe_guarantee("vflgan", _dp("vflgan_gaussian"))
    chosen = describe_guarantee("vflgan", _dp("vflgan_gaussian", select_by_fd=True))
    assert plain is not None and chosen is not None
    assert not any("Frechet" in item for item in plain.not_covered)
    assert chosen.not_covered[: len(plain.not_covered)] == plain.not_covered
    assert "Frechet distance" in chosen.not_covered[-1]


def test_the_series_scaling_is_listed_before_the_epoch_choice_when_fitted() -> None:
    """VFLGAN-TS's statement names its own holes; a party's fitted scaling is added from
    what the parties report (a user's file, basic_motions), not for the sine data."""
    from flwr_vflgan.privacy.guarantee import SERIES_SCALING
    from flwr_vflgan.runtime.party_data import series_blocks
    from flwr_vflgan.simulations.series_pipeline import reported_preprocessing

    sine = series_blocks(DataSpec(source="sine2", n_parties=2))
    motions = series_blocks(DataSpec(source="basic_motions", n_parties=2))
    assert not any(b.encoder.reads_private for b in sine)  # type: ignore[attr-defined]
    assert all(b.encoder.reads_private for b in motions)  # type: ignore[attr-defined]
    reported = SimpleNamespace(privacy=[{"preprocessing": [SERIES_SCALING]}, {}] * 2)
    assert reported_preprocessing(reported) == (SERIES_SCALING,)  # type: ignore[arg-type]
    assert reported_preprocessing(SimpleNamespace(privacy=[{}, {}])) == ()  # type: ignore[arg-type]
    dp = _dp("vflgan_gaussian", select_by_fd=True)
    plain = describe_guarantee("vflgan_ts", dp)
    scaled = describe_guarantee("vflgan_ts", dp, preprocessing=(SERIES_SCALING,))
    assert plain is not None and scaled is not None
    assert not any("minimum and maximum" in item for item in plain.not_covered)
    assert scaled.not_covered == (*plain.not_covered[:-1], SERIES_SCALING, plain.not_covered[-1])
    assert SERIES_SCALING in scaled.sentence()


def test_no_dp_no_guarantee_and_unknown_pairs_refused() -> None:
    assert describe_guarantee("vflgan", DPConfig()) is None
    with pytest.raises(ValueError, match="algorithm 'vtgan' does not run with dp=vflgan_gaussian"):
        describe_guarantee("vtgan", _dp("vflgan_gaussian"))
    with pytest.raises(ValueError, match="algorithm 'vtgan' does not run with dp=end_to_end"):
        describe_guarantee("vtgan", _dp("end_to_end"))


def _privacy(variant: str, mechanism: str) -> dict[str, object]:
    statement = describe_guarantee(variant, _dp(mechanism))
    assert statement is not None
    party = {
        "party": "party 0",
        "epsilon": 0.9997,
        "target_epsilon": 1.0,
        "delta": 1e-5,
        "noise_multiplier": 3.1,
        "steps": 100,
        "accountant": "rdp-without-replacement",
        "conversion": "classic",
    }
    return {
        "mechanism": mechanism,
        "target_epsilon": 1.0,
        "delta": 1e-5,
        **statement.to_dict(),
        "parties": [party],
        "budget_stop": None,
        "published_generator": "last",
    }


def test_the_printed_privacy_lines_and_report_rows_say_what_epsilon_covers(tmp_path: Path):
    spec = RunSpec(
        algorithm=VFLGANConfig(),
        data=DataSpec(source="adult", n_parties=2),
        runtime=RuntimeConfig(),
        output=OutputConfig(),
        seed=0,
        run_dir=tmp_path,
    )
    stream = io.StringIO()
    metrics = {
        "wall_seconds": 1.0,
        "steps": 10,
        "exchanges": 10,
        "best_epoch": None,
        "fd": None,
        "synthetic_rows": 5,
        "privacy": _privacy("vflgan", "vflgan_gaussian"),
    }
    Reporter(spec, stream).finish(metrics)
    lines = stream.getvalue().splitlines()
    assert "privacy      epsilon covers first_layer: paper 000's first-layer argument" in "\n".join(
        lines
    )
    (party,) = [line for line in lines if line.startswith("privacy      party 0")]
    assert "epsilon 0.9997 of 1 at delta 1e-05 for first_layer (vflgan_gaussian" in party
    (uncovered,) = [line for line in lines if "not covered" in line]
    assert "shared discriminator D_s" in uncovered and "encoders" in uncovered
    rows = privacy_rows(_privacy("vflgan", "dpsgd"))
    assert rows["dp guarantee"].startswith("local_discriminators: every update")
    assert "shared discriminator D_s" in rows["not covered by epsilon"]
