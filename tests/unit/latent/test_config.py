"""Tests for the ``latent.*`` settings: validation messages, widths and the dict round trip."""

from __future__ import annotations

import json
import math

import pytest

from flwr_vflgan.latent.config import LatentSettings


def test_the_defaults_are_valid_and_survive_json() -> None:
    settings = LatentSettings()
    assert LatentSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings


def test_yaml_lists_become_tuples() -> None:
    settings = LatentSettings.from_dict({"ae_hidden": [8, 4], "denoiser_hidden": [16]})
    assert settings.ae_hidden == (8, 4)
    assert settings.denoiser_hidden == (16,)
    assert settings.to_dict()["ae_hidden"] == [8, 4]


def test_unknown_keys_are_listed_with_the_valid_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown latent config keys \['epochs'\]; valid: .*ae_epochs"
    ):
        LatentSettings.from_dict({"epochs": 3})


@pytest.mark.parametrize(
    "name",
    ["ae_epochs", "ae_batch_size", "diffusion_steps", "diffusion_epochs", "diffusion_batch_size"],
)
@pytest.mark.parametrize("value", [0, -2, 1.5, True, "3"])
def test_counts_must_be_positive_integers(name: str, value: object) -> None:
    with pytest.raises(
        ValueError, match=rf"latent\.{name} must be a positive integer, got {value!r}"
    ):
        LatentSettings(**{name: value})  # type: ignore[arg-type]


def test_the_message_reads_as_documented() -> None:
    with pytest.raises(ValueError) as caught:
        LatentSettings(ae_epochs=0)
    assert str(caught.value) == "latent.ae_epochs must be a positive integer, got 0"


@pytest.mark.parametrize("name", ["latent_per_column", "ae_lr", "diffusion_lr"])
@pytest.mark.parametrize("value", [0, -1e-3, math.nan, math.inf, False, "0.001"])
def test_rates_must_be_positive_finite_numbers(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"latent\.{name} must be a positive finite number"):
        LatentSettings(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["ae_hidden", "denoiser_hidden"])
@pytest.mark.parametrize("value", [(), (8, 0), (8, 2.5), 64, "64", (True,)])
def test_widths_must_be_non_empty_lists_of_positive_integers(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"latent\.{name} must be a non-empty list of positive"):
        LatentSettings(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("per_column", "n_columns", "expected"),
    [
        (1.0, 8, 8),
        (1.5, 3, 5),  # ceil(4.5)
        (0.5, 7, 4),  # ceil(3.5)
        (1.1, 10, 11),  # 1.1 * 10 is 11.000000000000002 in floating point: still 11
        (0.1, 3, 2),  # ceil(0.3) = 1, raised to the floor of 2
        (4.0, 1, 4),
    ],
)
def test_latent_width(per_column: float, n_columns: int, expected: int) -> None:
    assert LatentSettings(latent_per_column=per_column).latent_width(n_columns) == expected


@pytest.mark.parametrize("n_columns", [0, -1, 2.0, True])
def test_latent_width_needs_a_positive_column_count(n_columns: object) -> None:
    with pytest.raises(ValueError, match="n_columns must be a positive integer"):
        LatentSettings().latent_width(n_columns)  # type: ignore[arg-type]


def test_a_small_table_takes_at_least_the_minimum_steps() -> None:
    settings = LatentSettings()
    # Adult's 48,842 rows take the epochs as given (96 and 191 batches an epoch) ...
    assert settings.ae_epochs_for(48_842) == settings.ae_epochs == 20
    assert settings.diffusion_epochs_for(48_842) == settings.diffusion_epochs == 150
    # ... California housing's 20,640 rows are raised to the autoencoder's step floor
    # (its 150 denoiser epochs of 81 batches already pass the denoiser's) ...
    assert settings.ae_epochs_for(20_640) == 47  # 41 batches: 1,927 steps
    assert settings.diffusion_epochs_for(20_640) == 150  # 12,150 steps
    assert settings.diffusion_epochs_for(10_000) == 275  # 40 batches: 11,000 steps
    # ... and a 1,000-row table stops at the epoch caps (2 and 4 batches an epoch),
    # where the floor alone would ask for 950 and 2,750 epochs.
    assert settings.ae_epochs_for(1_000) == settings.ae_max_epochs == 200
    assert settings.diffusion_epochs_for(1_000) == settings.diffusion_max_epochs == 500
    uncapped = LatentSettings(ae_max_epochs=10_000, diffusion_max_epochs=10_000)
    assert uncapped.ae_epochs_for(1_000) == 950  # 1,900 steps
    assert uncapped.diffusion_epochs_for(1_000) == 2_750  # 11,000 steps
    # The cap limits the raise only: epochs asked for above it are kept.
    assert LatentSettings(ae_epochs=300, ae_max_epochs=200).ae_epochs_for(1_000) == 300
    with pytest.raises(ValueError, match=r"latent\.diffusion_max_epochs must be a positive"):
        LatentSettings(diffusion_max_epochs=0)
    with pytest.raises(ValueError, match="n_rows must be a positive integer"):
        settings.ae_epochs_for(0)
    with pytest.raises(ValueError, match=r"latent\.numeric_scaling must be 'quantile' or"):
        LatentSettings(numeric_scaling="minmax")
