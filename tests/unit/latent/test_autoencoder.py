"""Tests for the parties' autoencoders: the loss of each column kind, decoding to valid
rows, determinism, checkpoints and that a small table is actually learned."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.special import ndtri

from flwr_vflgan.data.encoder import Span, TabularEncoder
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema
from flwr_vflgan.latent.autoencoder import (
    QUANTILE_LEVELS,
    PartyAutoencoder,
    QuantileNormalizer,
    autoencoder_state,
    decode_latents,
    decode_rows,
    encode_rows,
    load_autoencoder,
    reconstruction_loss,
    train_autoencoder,
)
from flwr_vflgan.latent.config import LatentSettings

SPANS = [
    Span("number", 0, 1, "identity"),
    Span("colour", 1, 3, "gumbel_softmax"),
    Span("pixel", 4, 1, "tanh"),
    Span("income", 5, 3, "identity_missing"),
]
FAST = LatentSettings(
    ae_hidden=(16,), ae_epochs=3, ae_batch_size=32, latent_per_column=1.0, ae_min_steps=1
)


def _frame(rows: int, seed: int) -> tuple[pd.DataFrame, Schema]:
    """A mixed table: a number, two categories tied to it, an integer with gaps."""
    rng = np.random.default_rng(seed)
    number = rng.normal(size=rows)
    colour = np.where(number > 0.5, "red", np.where(number < -0.5, "blue", "green"))
    income = rng.integers(0, 100, rows).astype(float)
    income[rng.random(rows) < 0.2] = np.nan
    frame = pd.DataFrame(
        {
            "number": number,
            "colour": colour,
            "shape": rng.choice(["circle", "square", "star", "hexagon"], rows),
            "income": income,
        }
    )
    schema = Schema(
        columns=(
            ColumnSpec("number", ColumnKind.CONTINUOUS),
            ColumnSpec("colour", ColumnKind.CATEGORICAL),
            ColumnSpec("shape", ColumnKind.CATEGORICAL),
            ColumnSpec("income", ColumnKind.INTEGER),
        )
    )
    return frame, schema


def _encoded(rows: int = 200, seed: int = 0) -> tuple[TabularEncoder, np.ndarray]:
    frame, schema = _frame(rows, seed)
    encoder = TabularEncoder().fit(frame, schema)
    return encoder, encoder.transform(frame)


# -- the loss ---------------------------------------------------------------------------


def test_loss_of_each_kind_against_hand_computed_values() -> None:
    # One row: number off by 1 (squared error 1); colour logits all 0 against category 0
    # (cross-entropy log 3); pixel exact (tanh(atanh 0.5) = 0.5); income present, value
    # off by 2 (4) and indicator logits 0 (log 2): its term is (4 + log 2) / 2.
    x = torch.tensor([[0.0, 1, 0, 0, 0.5, 1.0, 1, 0]])
    raw = torch.tensor([[1.0, 0, 0, 0, math.atanh(0.5), 3.0, 0, 0]])
    expected = (1 + math.log(3) + 0 + (4 + math.log(2)) / 2) / 4
    assert float(reconstruction_loss(raw, x, SPANS)) == pytest.approx(expected, rel=1e-6)


def test_a_one_hot_block_costs_cross_entropy_not_squared_error() -> None:
    # Uniform logits against a one-hot target: log(width) each, not a squared error.
    spans = [Span("a", 0, 2, "gumbel_softmax"), Span("b", 2, 5, "gumbel_softmax")]
    x = torch.tensor([[1.0, 0, 0, 0, 1, 0, 0]])
    loss = reconstruction_loss(torch.zeros(1, 7), x, spans)
    assert float(loss) == pytest.approx((math.log(2) + math.log(5)) / 2, rel=1e-6)


def test_a_missing_value_costs_nothing_but_its_indicator() -> None:
    spans = [Span("income", 0, 3, "tanh_missing")]
    x = torch.tensor([[0.0, 0, 1]])  # missing: the value slot is a placeholder
    raw = torch.tensor([[5.0, -20, 20]])  # any value, indicator confidently "missing"
    assert float(reconstruction_loss(raw, x, spans)) < 1e-6
    present = torch.tensor([[0.0, 1, 0]])
    assert float(reconstruction_loss(torch.tensor([[5.0, 20, -20]]), present, spans)) > 0.4


def test_perfect_reconstruction_has_the_lowest_loss() -> None:
    _, rows = _encoded()
    x = torch.as_tensor(rows)
    encoder, _ = _encoded()
    perfect = x.clone()
    for span in encoder.spans:  # confident logits on the one-hot slots
        if span.activation == "gumbel_softmax":
            perfect[:, span.start : span.stop] = 30 * (2 * x[:, span.start : span.stop] - 1)
        elif span.activation == "identity_missing":
            perfect[:, span.start + 1 : span.stop] = 30 * (2 * x[:, span.start + 1 : span.stop] - 1)
    best = float(reconstruction_loss(perfect, x, encoder.spans))
    assert best < 1e-6
    noisy = perfect + 0.3 * torch.randn(perfect.shape, generator=torch.Generator().manual_seed(0))
    assert float(reconstruction_loss(noisy, x, encoder.spans)) > best + 1e-3


# -- the quantile normalizer ----------------------------------------------------------------


def _reference_scores(x: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """``Phi^-1(F(x))`` by numpy, ties at their middle level (scikit-learn's rule)."""
    levels = np.linspace(0.0, 1.0, QUANTILE_LEVELS)
    q = np.quantile(sample.astype(np.float64), levels).astype(np.float32)
    up = np.interp(x, q, levels)
    down = -np.interp(-x, -q[::-1], -levels[::-1])
    return ndtri(np.clip(0.5 * (up + down), 1e-7, 1 - 1e-7))


def test_normal_scores_match_a_numpy_reference_with_ties() -> None:
    rng = np.random.default_rng(0)
    sample = np.where(rng.random(3000) < 0.6, 0.0, rng.exponential(2.0, 3000)).astype(np.float32)
    spans = [Span("gain", 0, 1, "identity")]
    normalizer = QuantileNormalizer(spans).fit(torch.as_tensor(sample[:, None]))
    probe = np.array([-1.0, 0.0, 0.5, 1.0, 3.0, 50.0], dtype=np.float32)
    scores = normalizer(torch.as_tensor(probe[:, None]))[:, 0].numpy()
    np.testing.assert_allclose(scores, _reference_scores(probe, sample), atol=1e-4)
    # The point mass at 0 (about 60% of rows) sits at the middle of its levels.
    share = float((sample == 0).mean())
    assert scores[1] == pytest.approx(ndtri(share / 2), abs=0.01)


def test_a_point_mass_decodes_to_the_point_over_a_band_of_scores() -> None:
    rng = np.random.default_rng(1)
    sample = np.where(rng.random(5000) < 0.9, 0.0, rng.uniform(1, 5, 5000)).astype(np.float32)
    normalizer = QuantileNormalizer([Span("gain", 0, 1, "identity")])
    normalizer.fit(torch.as_tensor(sample[:, None]))
    band = torch.linspace(-3.0, float(ndtri(0.89)), 50)[:, None]
    assert torch.equal(normalizer.inverse(band), torch.zeros(50, 1))
    above = normalizer.inverse(torch.tensor([[2.0]]))
    assert 1.0 < float(above) <= 5.0


def test_the_round_trip_and_the_unfitted_map() -> None:
    rng = np.random.default_rng(2)
    values = torch.as_tensor(rng.normal(3.0, 2.0, (2000, 1)).astype(np.float32))
    spans = [Span("x", 0, 1, "identity")]
    fitted = QuantileNormalizer(spans).fit(values)
    torch.testing.assert_close(fitted.inverse(fitted(values)), values, atol=1e-3, rtol=0)
    # Before fit, about the identity (linear interpolation between normal quantiles).
    grid = torch.linspace(-3, 3, 61)[:, None]
    torch.testing.assert_close(QuantileNormalizer(spans)(grid), grid, atol=0.02, rtol=0)
    torch.testing.assert_close(QuantileNormalizer(spans).inverse(grid), grid, atol=0.02, rtol=0)


def test_missing_values_neither_shape_the_quantiles_nor_get_a_score() -> None:
    # [value, present, missing]: the placeholder 0 of missing rows must not count.
    rows = torch.tensor([[5.0, 1, 0], [7.0, 1, 0], [0.0, 0, 1], [0.0, 0, 1], [6.0, 1, 0]])
    normalizer = QuantileNormalizer([Span("income", 0, 3, "identity_missing")]).fit(rows)
    assert float(normalizer.quantiles[0, 0]) == 5.0 and float(normalizer.quantiles[0, -1]) == 7.0
    scores = normalizer(rows)
    assert torch.equal(scores[2:4, 0], torch.zeros(2))
    assert torch.equal(scores[:, 1:], rows[:, 1:])
    assert float(scores[4, 0]) == pytest.approx(0.0, abs=1e-3)  # the median


# -- decoding ---------------------------------------------------------------------------


def test_decode_rows_gives_one_hot_blocks_and_passes_numbers() -> None:
    raw = torch.randn(50, 8, generator=torch.Generator().manual_seed(1))
    rows = decode_rows(raw, SPANS)
    torch.testing.assert_close(rows[:, 0], raw[:, 0])
    torch.testing.assert_close(rows[:, 4], torch.tanh(raw[:, 4]))
    torch.testing.assert_close(rows[:, 5], raw[:, 5])
    for start, stop in ((1, 4), (6, 8)):
        block = rows[:, start:stop]
        assert set(block.unique().tolist()) <= {0.0, 1.0}
        assert torch.equal(block.sum(dim=1), torch.ones(50))
        assert torch.equal(block.argmax(dim=1), raw[:, start:stop].argmax(dim=1))


def test_inverse_transform_accepts_decoded_latents() -> None:
    encoder, rows = _encoded()
    model = PartyAutoencoder(encoder.spans, 3, (8,))
    latents = 5 * torch.randn(40, 3, generator=torch.Generator().manual_seed(2)).numpy()
    decoded = decode_latents(model, latents, encoder.spans)
    assert decoded.dtype == np.float32 and decoded.shape == (40, rows.shape[1])
    table = encoder.inverse_transform(decoded)
    assert set(table["colour"]) <= {"red", "green", "blue"}
    assert set(table["shape"]) <= {"circle", "square", "star", "hexagon"}
    income = encoder.spans[-1]
    gaps = decoded[:, income.start + 2] == 1  # the "missing" slot chosen
    assert table["income"].isna().to_numpy().tolist() == gaps.tolist()


@pytest.mark.parametrize(
    ("latents", "message"),
    [
        (np.zeros((4, 2), dtype=np.float32), r"latents must have shape \(n, 3\), got \(4, 2\)"),
        (np.zeros(3, dtype=np.float32), r"latents must have shape \(n, 3\), got \(3,\)"),
        (np.array([[0.0, np.nan, 0.0]] * 2), "latents must be finite: 2 rows hold NaN"),
    ],
)
def test_decode_latents_names_a_bad_input(latents: np.ndarray, message: str) -> None:
    encoder, _ = _encoded()
    model = PartyAutoencoder(encoder.spans, 3, (8,))
    with pytest.raises(ValueError, match=message):
        decode_latents(model, latents, encoder.spans)


def test_decode_latents_needs_the_model_spans() -> None:
    encoder, _ = _encoded()
    model = PartyAutoencoder(encoder.spans, 3, (8,))
    with pytest.raises(ValueError, match="spans must be the model's spans"):
        decode_latents(model, np.zeros((2, 3), dtype=np.float32), encoder.spans[:-1])


def test_spans_must_tile_the_row() -> None:
    with pytest.raises(ValueError, match="span 'b' starts at 3, expected 1"):
        PartyAutoencoder([Span("a", 0, 1, "identity"), Span("b", 3, 2, "gumbel_softmax")], 2, (4,))
    with pytest.raises(ValueError, match="activation 'identity_missing' of width 4"):
        PartyAutoencoder([Span("a", 0, 4, "identity_missing")], 2, (4,))


def test_rows_must_match_the_spans() -> None:
    with pytest.raises(ValueError, match=r"rows must have shape \(n, 8\), got \(5, 7\)"):
        train_autoencoder(np.zeros((5, 7)), SPANS, FAST, seed=0)


# -- training, determinism, checkpoints ---------------------------------------------------


def test_the_same_seed_gives_the_same_model_and_latents() -> None:
    encoder, rows = _encoded()
    first, losses = train_autoencoder(rows, encoder.spans, FAST, seed=7)
    second, again = train_autoencoder(rows, encoder.spans, FAST, seed=7)
    other, _ = train_autoencoder(rows, encoder.spans, FAST, seed=8)
    assert losses == again and len(losses) == FAST.ae_epochs
    state, same = autoencoder_state(first), autoencoder_state(second)
    assert all(np.array_equal(state[name], same[name]) for name in state)
    assert np.array_equal(encode_rows(first, rows), encode_rows(second, rows))
    assert not np.array_equal(encode_rows(first, rows), encode_rows(other, rows))


def test_training_leaves_the_global_generator_alone_and_the_model_in_eval_mode() -> None:
    encoder, rows = _encoded()
    before = torch.get_rng_state()
    model, _ = train_autoencoder(rows, encoder.spans, FAST, seed=1)
    assert torch.equal(torch.get_rng_state(), before)
    assert not model.training


def test_a_checkpoint_gives_back_the_same_latents_and_rows() -> None:
    encoder, rows = _encoded()
    model, _ = train_autoencoder(rows, encoder.spans, FAST, seed=3)
    state = autoencoder_state(model)
    assert state["normalizer.quantiles"].shape == (2, QUANTILE_LEVELS)  # number, income
    copy = load_autoencoder(encoder.spans, model.latent_dim, model.hidden, state)
    latents = encode_rows(model, rows)
    assert latents.dtype == np.float32 and latents.shape == (len(rows), 4)  # 4 columns
    assert np.array_equal(encode_rows(copy, rows), latents)
    assert np.array_equal(
        decode_latents(copy, latents, encoder.spans), decode_latents(model, latents, encoder.spans)
    )


def test_a_checkpoint_of_another_architecture_is_refused() -> None:
    encoder, _ = _encoded()
    state = autoencoder_state(PartyAutoencoder(encoder.spans, 3, (8,)))
    with pytest.raises(
        ValueError, match=r"encoder.0.weight has shape \(8, \d+\), expected \(6, \d+\)"
    ):
        load_autoencoder(encoder.spans, 3, (6,), state)
    del state["decoder.0.bias"]
    with pytest.raises(ValueError, match=r"missing \['decoder.0.bias'\]"):
        load_autoencoder(encoder.spans, 3, (8,), state)


def test_the_autoencoder_learns_a_small_mixed_table() -> None:
    encoder, rows = _encoded(rows=600, seed=4)
    settings = LatentSettings(
        ae_hidden=(32,), ae_epochs=40, ae_batch_size=64, ae_lr=3e-3, ae_min_steps=1
    )
    logged: list[tuple[int, float]] = []
    model, losses = train_autoencoder(
        rows, encoder.spans, settings, seed=0, log_every=lambda e, v: logged.append((e, v))
    )
    assert [e for e, _ in logged] == list(range(40)) and [v for _, v in logged] == losses
    assert losses[-1] < losses[0] / 4
    back = encoder.inverse_transform(decode_latents(model, encode_rows(model, rows), encoder.spans))
    real = encoder.inverse_transform(rows)
    # Chance is 1/3 for colour and 1/4 for shape (uniform); the missing flag is 80/20.
    assert (back["colour"] == real["colour"]).mean() > 0.9
    assert (back["shape"] == real["shape"]).mean() > 0.7
    assert (back["income"].isna() == real["income"].isna()).mean() > 0.95
    assert np.corrcoef(back["number"], real["number"])[0, 1] > 0.95


def test_a_zero_inflated_column_decodes_to_exact_zeros() -> None:
    # 85% zeros and a long tail, as Adult's capital-gain: decoded rows keep exact zeros
    # (a standardized output would decode to small non-zero amounts instead).
    rng = np.random.default_rng(5)
    rows = 600
    gain = np.where(rng.random(rows) < 0.85, 0.0, rng.lognormal(8, 1, rows)).round()
    frame = pd.DataFrame({"gain": gain, "group": rng.choice(["a", "b", "c"], rows)})
    schema = Schema(
        columns=(
            ColumnSpec("gain", ColumnKind.INTEGER),
            ColumnSpec("group", ColumnKind.CATEGORICAL),
        )
    )
    encoder = TabularEncoder().fit(frame, schema)
    encoded = encoder.transform(frame)
    settings = LatentSettings(
        ae_hidden=(32,), ae_epochs=30, ae_batch_size=64, ae_lr=3e-3, ae_min_steps=1
    )
    model, _ = train_autoencoder(encoded, encoder.spans, settings, seed=0)
    back = encoder.inverse_transform(
        decode_latents(model, encode_rows(model, encoded), encoder.spans)
    )
    zero = frame["gain"] == 0
    assert (back["gain"][zero] == 0).mean() > 0.97
    assert (back["gain"] == 0).mean() == pytest.approx(zero.mean(), abs=0.03)
