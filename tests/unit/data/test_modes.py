"""Tests for flwr_vflgan.data.modes (CTGAN's mode-specific normalisation)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.mixture import BayesianGaussianMixture

from flwr_vflgan.data.encoder import Span
from flwr_vflgan.data.modes import ModeSpecificEncoder
from flwr_vflgan.data.registry import load_dataset
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema

CONT, INT, CAT = ColumnKind.CONTINUOUS, ColumnKind.INTEGER, ColumnKind.CATEGORICAL


def bimodal(n_per_mode: int = 500, seed: int = 0) -> np.ndarray:
    """Half N(-10, 1), half N(10, 1)."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(-10, 1, n_per_mode), rng.normal(10, 1, n_per_mode)])


def bimodal_frame() -> tuple[pd.DataFrame, Schema]:
    return pd.DataFrame({"x": bimodal()}), Schema((ColumnSpec("x", CONT),))


def mixed_frame(n: int = 300, seed: int = 1) -> tuple[pd.DataFrame, Schema]:
    """Adult-like: two integer columns, a continuous one, categoricals (one with missing)."""
    rng = np.random.default_rng(seed)
    colours = np.array(["red", "green", "blue"], dtype=object)[rng.integers(0, 3, n)]
    colours[::17] = None
    frame = pd.DataFrame(
        {
            "age": rng.integers(17, 90, n).astype(np.int64),
            "colour": colours,
            "weight": rng.normal(70, 12, n),
            "hours": rng.choice([20, 40, 60], n).astype(np.int32),
            "sex": rng.choice(["F", "M"], n).astype(object),
        }
    )
    schema = Schema(
        (
            ColumnSpec("age", INT),
            ColumnSpec("colour", CAT),
            ColumnSpec("weight", CONT),
            ColumnSpec("hours", INT),
            ColumnSpec("sex", CAT),
        )
    )
    return frame, schema


def kept_fitted(encoder: ModeSpecificEncoder, column: str) -> dict[str, list[float]]:
    return encoder.state_dict()["numeric"][column]


class TestModes:
    def test_bimodal_column_keeps_two_modes_near_plus_minus_ten(self) -> None:
        frame = pd.DataFrame({"x": bimodal(2000)})
        encoder = ModeSpecificEncoder(seed=0).fit(frame, Schema((ColumnSpec("x", CONT),)))
        assert encoder.n_modes == {"x": 2}
        modes = kept_fitted(encoder, "x")
        np.testing.assert_allclose(sorted(modes["means"]), [-10, 10], atol=0.1)
        # The variational covariance adds the Wishart prior (the whole column's variance,
        # about 101, with one degree of freedom) to the 2000 unit-variance points:
        # sqrt((101 + 2000) / 2001) = 1.025.
        np.testing.assert_allclose(modes["stds"], [1.025, 1.025], atol=0.05)

    def test_spans_tile_output_and_discrete_spans_are_the_categoricals(self) -> None:
        frame = pd.DataFrame(
            {
                "x": bimodal(500),
                "c": ["a", "b", "c", "a"] * 250,
                "k": [7] * 1000,
                "d": [True, False] * 500,
            }
        )
        schema = Schema(
            (
                ColumnSpec("x", CONT),
                ColumnSpec("c", CAT),
                ColumnSpec("k", INT),
                ColumnSpec("d", CAT),
            )
        )
        encoder = ModeSpecificEncoder().fit(frame, schema)
        # x: scalar + 2 modes; c: 3 categories; k (constant): scalar + 1 mode; d: 2.
        assert encoder.spans == (
            Span("x", 0, 1, "tanh"),
            Span("x", 1, 2, "gumbel_softmax"),
            Span("c", 3, 3, "gumbel_softmax"),
            Span("k", 6, 1, "tanh"),
            Span("k", 7, 1, "gumbel_softmax"),
            Span("d", 8, 2, "gumbel_softmax"),
        )
        assert encoder.discrete_spans == (
            Span("c", 3, 3, "gumbel_softmax"),
            Span("d", 8, 2, "gumbel_softmax"),
        )
        assert encoder.output_dim == 10
        assert encoder.schema == schema

    def test_encoding_by_hand_for_the_sampled_mode(self) -> None:
        frame, schema = bimodal_frame()
        encoder = ModeSpecificEncoder().fit(frame, schema)
        modes = kept_fitted(encoder, "x")
        x = encoder.transform(frame, np.random.default_rng(3))
        assert x.dtype == np.float32 and x.shape == (1000, 3)
        one_hot = x[:, 1:]
        np.testing.assert_array_equal(one_hot.sum(axis=1), 1)
        chosen = one_hot.argmax(axis=1)
        means, stds = np.array(modes["means"])[chosen], np.array(modes["stds"])[chosen]
        expected = np.clip((frame["x"].to_numpy() - means) / (4 * stds), -0.99, 0.99)
        np.testing.assert_allclose(x[:, 0], expected, rtol=1e-6, atol=1e-7)
        # Values drawn near -10 belong to the mode whose mean is near -10.
        negative_mode = int(np.argmin(modes["means"]))
        assert (chosen[:500] == negative_mode).mean() > 0.99
        assert (chosen[500:] != negative_mode).mean() > 0.99

    def test_scalar_is_clipped_to_099(self) -> None:
        frame, schema = bimodal_frame()
        encoder = ModeSpecificEncoder().fit(frame, schema)
        far = pd.DataFrame({"x": [1e4, -1e4, 0.0, 10.0]})
        x = encoder.transform(far, np.random.default_rng(0))
        assert np.all(np.abs(x[:, 0]) <= 0.99)
        assert x[0, 0] == pytest.approx(0.99) and x[1, 0] == pytest.approx(-0.99)

    def test_mode_sampling_follows_the_posterior_and_the_rng(self) -> None:
        frame, schema = bimodal_frame()
        encoder = ModeSpecificEncoder(seed=0).fit(frame, schema)
        # Independent reference: scikit-learn's own posterior of the same mixture.
        mixture = BayesianGaussianMixture(
            n_components=10,
            weight_concentration_prior_type="dirichlet_process",
            weight_concentration_prior=0.001,
            max_iter=100,
            n_init=1,
            random_state=0,
        ).fit(frame[["x"]].to_numpy())
        kept = mixture.weights_ > 0.005
        grid = np.linspace(-5, 5, 2001)
        posterior = mixture.predict_proba(grid[:, None])[:, kept] + 1e-6
        posterior /= posterior.sum(axis=1, keepdims=True)
        between = grid[np.argmin(np.abs(posterior[:, 0] - 0.5))]
        expected = posterior[np.argmin(np.abs(grid - between)), 0]
        assert 0.3 < expected < 0.7
        repeated = pd.DataFrame({"x": np.full(4000, between)})
        first = encoder.transform(repeated, np.random.default_rng(1))
        second = encoder.transform(repeated, np.random.default_rng(2))
        again = encoder.transform(repeated, np.random.default_rng(1))
        np.testing.assert_array_equal(first, again)
        assert not np.array_equal(first[:, 1:], second[:, 1:])
        # The fitted modes are scikit-learn's kept components, in component order.
        np.testing.assert_allclose(kept_fitted(encoder, "x")["means"], mixture.means_[kept, 0])
        share = first[:, 1].mean()
        assert abs(share - expected) < 4 * math.sqrt(expected * (1 - expected) / 4000)

    def test_constant_column_has_one_mode_and_no_nan(self) -> None:
        frame = pd.DataFrame({"k": [5.0] * 20, "z": [0] * 20})
        schema = Schema((ColumnSpec("k", CONT), ColumnSpec("z", INT)))
        encoder = ModeSpecificEncoder().fit(frame, schema)
        assert encoder.n_modes == {"k": 1, "z": 1}
        assert kept_fitted(encoder, "k")["stds"][0] > 0
        x = encoder.transform(frame, np.random.default_rng(0))
        assert np.isfinite(x).all()
        np.testing.assert_array_equal(x, [[0, 1, 0, 1]] * 20)
        pd.testing.assert_frame_equal(encoder.inverse_transform(x), frame)

    def test_weight_threshold_keeps_at_least_the_heaviest_mode(self) -> None:
        frame, schema = bimodal_frame()
        encoder = ModeSpecificEncoder(weight_threshold=0.999).fit(frame, schema)
        assert encoder.n_modes == {"x": 1}


class TestRoundTrip:
    def test_integers_and_categoricals_exact_continuous_close(self) -> None:
        frame, schema = mixed_frame()
        encoder = ModeSpecificEncoder().fit(frame, schema)
        x = encoder.transform(frame, np.random.default_rng(0))
        back = encoder.inverse_transform(x)
        assert list(back.columns) == schema.names
        assert back["age"].tolist() == frame["age"].tolist() and back["age"].dtype == np.int64
        assert back["hours"].tolist() == frame["hours"].tolist()
        assert back["hours"].dtype == np.int32
        assert back["sex"].tolist() == frame["sex"].tolist()
        pd.testing.assert_series_equal(back["colour"], frame["colour"])
        np.testing.assert_allclose(back["weight"], frame["weight"], rtol=1e-5)

    def test_inverse_clips_rounds_and_takes_argmax(self) -> None:
        frame = pd.DataFrame({"k": [3, 3, 3, 3], "c": ["u", "v", "u", "v"]})
        schema = Schema((ColumnSpec("k", INT), ColumnSpec("c", CAT)))
        encoder = ModeSpecificEncoder().fit(frame, schema)
        # k is constant 3 (one mode, std at the floor 1e-6 * 3): any scalar clips to 3.
        generated = np.array([[5.0, 0.2, 0.1, 0.9], [-5.0, -1.0, 2.0, 1.0]])
        back = encoder.inverse_transform(generated)
        assert back["k"].tolist() == [3, 3]
        assert back["c"].tolist() == ["v", "u"]

    def test_inverse_of_a_generated_scalar_by_hand(self) -> None:
        frame, schema = bimodal_frame()
        encoder = ModeSpecificEncoder().fit(frame, schema)
        modes = kept_fitted(encoder, "x")
        generated = np.array([[0.1, 0.9, 0.1], [-3.0, 0.0, 0.5], [1.0, 0.2, 0.3]])
        back = encoder.inverse_transform(generated)["x"].to_numpy()
        (m0, m1), (s0, s1) = modes["means"], modes["stds"]
        lo, hi = frame["x"].min(), frame["x"].max()
        expected = [0.1 * 4 * s0 + m0, np.clip(-4 * s1 + m1, lo, hi), np.clip(4 * s1 + m1, lo, hi)]
        np.testing.assert_allclose(back, expected)

    def test_subsampled_fit_keeps_the_full_range(self) -> None:
        frame, schema = bimodal_frame()
        frame.loc[7, "x"] = 50.0  # an outlier that the 20-row fit sample may well miss
        encoder = ModeSpecificEncoder(max_fit_rows=20, seed=4).fit(frame, schema)
        assert kept_fitted(encoder, "x")["maximum"] == 50.0
        back = encoder.inverse_transform(encoder.transform(frame, np.random.default_rng(0)))
        assert back["x"].max() <= 50.0

    def test_adult_subsample(self) -> None:
        adult = load_dataset("adult")
        sample = adult.frame.sample(n=2000, random_state=0).reset_index(drop=True)
        encoder = ModeSpecificEncoder().fit(sample, adult.schema)
        x = encoder.transform(sample, np.random.default_rng(0))
        back = encoder.inverse_transform(x)
        for name in adult.schema.names:
            if adult.schema.kind_of(name) is CAT:
                assert back[name].equals(sample[name]), name
        scalar_spans = [span for span in encoder.spans if span.activation == "tanh"]
        assert len(scalar_spans) == 6
        for span in scalar_spans:
            unclipped = np.abs(x[:, span.start]) < 0.99
            assert unclipped.mean() > 0.97, span.column
            np.testing.assert_array_equal(
                back[span.column][unclipped], sample[span.column][unclipped]
            )


class TestStateDict:
    def test_json_round_trip_gives_the_same_encoding(self) -> None:
        frame, schema = mixed_frame()
        encoder = ModeSpecificEncoder(max_modes=4, seed=2).fit(frame, schema)
        state = json.loads(json.dumps(encoder.state_dict()))
        assert state["schema_version"] == 2
        rebuilt = ModeSpecificEncoder.from_state_dict(state)
        assert rebuilt.spans == encoder.spans
        assert rebuilt.discrete_spans == encoder.discrete_spans
        assert rebuilt.schema == schema
        assert (rebuilt.max_modes, rebuilt.seed) == (4, 2)
        before = encoder.transform(frame, np.random.default_rng(9))
        after = rebuilt.transform(frame, np.random.default_rng(9))
        np.testing.assert_array_equal(before, after)
        pd.testing.assert_frame_equal(
            rebuilt.inverse_transform(after), encoder.inverse_transform(before)
        )

    def test_wrong_version(self) -> None:
        state = ModeSpecificEncoder().fit(*bimodal_frame()).state_dict()
        state["schema_version"] = 1
        with pytest.raises(ValueError, match="schema_version must be 2, got 1"):
            ModeSpecificEncoder.from_state_dict(state)

    def test_unknown_and_missing_keys(self) -> None:
        state = ModeSpecificEncoder().fit(*bimodal_frame()).state_dict()
        state["extra"] = 1
        del state["seed"]
        with pytest.raises(ValueError, match=r"missing \['seed'\], unknown \['extra'\]"):
            ModeSpecificEncoder.from_state_dict(state)

    def test_column_entry_missing(self) -> None:
        state = ModeSpecificEncoder().fit(*bimodal_frame()).state_dict()
        del state["numeric"]["x"]
        with pytest.raises(ValueError, match="no 'numeric' entry for column 'x'"):
            ModeSpecificEncoder.from_state_dict(state)

    def test_invalid_modes(self) -> None:
        state = ModeSpecificEncoder().fit(*bimodal_frame()).state_dict()
        state["numeric"]["x"]["stds"][0] = 0.0
        with pytest.raises(ValueError, match=r"'x' has invalid modes.*stds > 0"):
            ModeSpecificEncoder.from_state_dict(state)

    def test_mode_lists_of_different_lengths(self) -> None:
        state = ModeSpecificEncoder().fit(*bimodal_frame()).state_dict()
        state["numeric"]["x"]["means"].append(1.0)
        with pytest.raises(ValueError, match="same length >= 1, got 3, 2, 2"):
            ModeSpecificEncoder.from_state_dict(state)

    def test_numeric_entry_keys(self) -> None:
        state = ModeSpecificEncoder().fit(*bimodal_frame()).state_dict()
        del state["numeric"]["x"]["log_weights"]
        with pytest.raises(ValueError, match=r"numeric state of column 'x'.*\['log_weights'\]"):
            ModeSpecificEncoder.from_state_dict(state)

    def test_not_a_mapping(self) -> None:
        with pytest.raises(TypeError, match="state must be a mapping, got list"):
            ModeSpecificEncoder.from_state_dict([])  # type: ignore[arg-type]


class TestValidation:
    @pytest.mark.parametrize("value", [0, 1.5, True])
    def test_max_modes(self, value: object) -> None:
        with pytest.raises(ValueError, match="max_modes must be an integer >= 1, got"):
            ModeSpecificEncoder(max_modes=value)  # type: ignore[arg-type]

    @pytest.mark.parametrize("value", [-0.1, 1.0, "0.1", True])
    def test_weight_threshold(self, value: object) -> None:
        with pytest.raises(ValueError, match=r"weight_threshold must be in \[0, 1\), got"):
            ModeSpecificEncoder(weight_threshold=value)  # type: ignore[arg-type]

    def test_seed(self) -> None:
        with pytest.raises(ValueError, match="seed must be an integer >= 0, got -1"):
            ModeSpecificEncoder(seed=-1)

    @pytest.mark.parametrize("value", [1, 0, 2.5])
    def test_max_fit_rows(self, value: object) -> None:
        with pytest.raises(ValueError, match="max_fit_rows must be None or an integer >= 2"):
            ModeSpecificEncoder(max_fit_rows=value)  # type: ignore[arg-type]

    def test_not_fitted(self) -> None:
        encoder = ModeSpecificEncoder()
        frame, _ = bimodal_frame()
        for action in (
            lambda: encoder.transform(frame, np.random.default_rng(0)),
            lambda: encoder.inverse_transform(np.zeros((1, 3))),
            lambda: encoder.spans,
            lambda: encoder.discrete_spans,
            lambda: encoder.output_dim,
            encoder.state_dict,
        ):
            with pytest.raises(ValueError, match="not fitted yet"):
                action()

    def test_inverse_shape(self) -> None:
        encoder = ModeSpecificEncoder().fit(*bimodal_frame())
        with pytest.raises(ValueError, match=r"shape \(n_rows, 3\) \(output_dim\), got \(2, 4\)"):
            encoder.inverse_transform(np.zeros((2, 4)))

    def test_inverse_non_finite(self) -> None:
        encoder = ModeSpecificEncoder().fit(*bimodal_frame())
        with pytest.raises(ValueError, match="x has 1 NaN or infinite values"):
            encoder.inverse_transform(np.array([[0.0, np.nan, 1.0]]))

    def test_inverse_not_numeric(self) -> None:
        encoder = ModeSpecificEncoder().fit(*bimodal_frame())
        with pytest.raises(TypeError, match="x must be a numeric array"):
            encoder.inverse_transform(np.array([["a", "b", "c"]]))

    def test_a_numeric_column_with_no_value_names_the_drop_option(self) -> None:
        frame = pd.DataFrame({"a": [np.nan, np.nan]})
        with pytest.raises(ValueError, match=r"'a' has no values .*dataset.drop=\[a\]"):
            ModeSpecificEncoder().fit(frame, Schema((ColumnSpec("a", CONT),)))

    def test_gaps_at_transform_in_a_column_complete_at_fit_are_refused(self) -> None:
        frame, schema = bimodal_frame()
        encoder = ModeSpecificEncoder().fit(frame, schema)
        with pytest.raises(ValueError, match="numeric column 'x' has 1 missing values"):
            encoder.transform(pd.DataFrame({"x": [1.0, np.nan]}), np.random.default_rng(0))

    def test_infinite_numeric_value_at_transform(self) -> None:
        frame, schema = bimodal_frame()
        encoder = ModeSpecificEncoder().fit(frame, schema)
        with pytest.raises(ValueError, match="numeric column 'x' has 1 non-finite values"):
            encoder.transform(pd.DataFrame({"x": [1.0, np.inf]}), np.random.default_rng(0))

    def test_unseen_category(self) -> None:
        frame, schema = mixed_frame()
        encoder = ModeSpecificEncoder().fit(frame, schema)
        frame.loc[0, "sex"] = "X"
        with pytest.raises(ValueError, match=r"column 'sex' has 1 values not seen at fit.*'X'"):
            encoder.transform(frame, np.random.default_rng(0))

    def test_without_rng_the_encoding_is_a_function_of_the_rows(self) -> None:
        """The VFLGAN family's use: every process that encodes a party's rows agrees."""
        frame, schema = bimodal_frame()
        encoder = ModeSpecificEncoder(seed=3).fit(frame, schema)
        first = encoder.transform(frame)
        np.testing.assert_array_equal(first, encoder.transform(frame))
        np.testing.assert_array_equal(first, encoder.transform(frame, np.random.default_rng(3)))
        assert not encoder.public

    def test_rng_type(self) -> None:
        encoder = ModeSpecificEncoder().fit(*bimodal_frame())
        with pytest.raises(TypeError, match=r"rng must be a numpy\.random\.Generator, got int"):
            encoder.transform(bimodal_frame()[0], 0)  # type: ignore[arg-type]

    def test_fit_arguments(self) -> None:
        frame, schema = bimodal_frame()
        with pytest.raises(TypeError, match="schema must be a Schema, got dict"):
            ModeSpecificEncoder().fit(frame, {})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="frame with 0 rows"):
            ModeSpecificEncoder().fit(frame.iloc[:0], schema)
        with pytest.raises(ValueError, match=r"frame is missing columns \['x'\]"):
            ModeSpecificEncoder().fit(pd.DataFrame({"y": [1.0]}), schema)


class TestMissingNumericValues:
    """Numeric gaps are modelled: a [present, missing] indicator that is a discrete span."""

    @staticmethod
    def gappy(n: int = 400, seed: int = 3) -> tuple[pd.DataFrame, Schema]:
        rng = np.random.default_rng(seed)
        x = bimodal(n // 2, seed)
        x[rng.random(n) < 0.2] = np.nan
        age = pd.array(rng.integers(17, 90, n), dtype="Int64")
        age[rng.random(n) < 0.1] = pd.NA
        frame = pd.DataFrame({"x": x, "age": age, "c": rng.choice(["a", "b"], n)})
        schema = Schema((ColumnSpec("x", CONT), ColumnSpec("age", INT), ColumnSpec("c", CAT)))
        return frame, schema

    def test_indicator_spans_follow_the_mode_blocks_and_condition_like_categories(self) -> None:
        frame, schema = self.gappy()
        encoder = ModeSpecificEncoder().fit(frame, schema)
        widths = [s.width for s in encoder.spans]
        assert encoder.spans[0].activation == "tanh" and encoder.spans[2].width == 2
        assert sum(widths) == encoder.output_dim
        assert [(s.column, s.width) for s in encoder.discrete_spans] == [
            ("x", 2),
            ("age", 2),
            ("c", 2),
        ]

    def test_encoding_marks_gaps_and_decoding_restores_them_at_the_same_rows(self) -> None:
        frame, schema = self.gappy()
        encoder = ModeSpecificEncoder().fit(frame, schema)
        encoded = encoder.transform(frame, np.random.default_rng(0))
        assert np.isfinite(encoded).all()
        x_span = encoder.discrete_spans[0]
        gaps = frame["x"].isna().to_numpy()
        np.testing.assert_array_equal(encoded[:, x_span.start + 1], gaps)
        np.testing.assert_array_equal(encoded[:, x_span.start], ~gaps)
        assert (encoded[gaps, 0] == 0).all()
        back = encoder.inverse_transform(encoded)
        np.testing.assert_array_equal(back["x"].isna(), gaps)
        np.testing.assert_array_equal(back["age"].isna(), frame["age"].isna())
        assert back["age"].dtype == np.float64  # an integer column with gaps reads as float
        present = ~frame["age"].isna().to_numpy()
        np.testing.assert_array_equal(
            back["age"].to_numpy()[present], frame["age"].to_numpy()[present].astype(float)
        )

    def test_fit_uses_the_present_values_only(self) -> None:
        frame, schema = self.gappy()
        complete = frame.dropna(subset=["x"]).reset_index(drop=True)
        gappy = ModeSpecificEncoder(max_fit_rows=None).fit(frame[["x"]], schema.subset(["x"]))
        whole = ModeSpecificEncoder(max_fit_rows=None).fit(complete[["x"]], schema.subset(["x"]))
        fitted = {**kept_fitted(gappy, "x"), "has_missing": False}
        assert fitted == kept_fitted(whole, "x")

    def test_state_round_trip_keeps_the_indicator(self) -> None:
        frame, schema = self.gappy()
        encoder = ModeSpecificEncoder().fit(frame, schema)
        state = json.loads(json.dumps(encoder.state_dict()))
        assert state["numeric"]["x"]["has_missing"] is True
        again = ModeSpecificEncoder.from_state_dict(state)
        np.testing.assert_array_equal(
            again.transform(frame, np.random.default_rng(5)),
            encoder.transform(frame, np.random.default_rng(5)),
        )


# --- The mixed-type encoding (paper 001, Section 3.1.4: CTAB-GAN's point masses) ------


def _gain_table(n: int = 2000, seed: int = 0) -> tuple[pd.DataFrame, Schema]:
    """An Adult-like ``gain``: 90 % exactly 0, the rest log-normal integers; ``age``
    without a point mass."""
    rng = np.random.default_rng(seed)
    gain = np.where(rng.random(n) < 0.9, 0, np.rint(np.exp(rng.normal(8, 1, n)))).astype(int)
    frame = pd.DataFrame({"gain": gain, "age": rng.integers(17, 90, n)})
    schema = Schema((ColumnSpec("gain", ColumnKind.INTEGER), ColumnSpec("age", ColumnKind.INTEGER)))
    return frame, schema


def test_point_masses_are_the_values_over_the_share() -> None:
    from flwr_vflgan.data.modes import point_masses

    sample = np.array([0.0] * 6 + [1.0] * 3 + [2.5])
    assert point_masses(sample, 0.3) == (0.0, 1.0)
    assert point_masses(sample, 0.5) == (0.0,)
    assert point_masses(sample, None) == ()
    assert point_masses(np.zeros(5), 0.1) == ()  # a constant column needs none


def test_a_point_mass_gets_its_slot_and_decodes_exactly() -> None:
    frame, schema = _gain_table()
    encoder = ModeSpecificEncoder(seed=0, point_mass_share=0.1).fit(frame, schema)
    gain = encoder._columns[0]
    assert gain.point_masses == (0.0,)
    assert encoder._columns[1].point_masses == ()  # no age has 10 % of the rows
    x = encoder.transform(frame)
    zero = frame["gain"].to_numpy() == 0
    # The point mass: scalar 0 and slot 0 of the block; the other rows use the modes.
    assert np.all(x[zero, 0] == 0) and np.all(x[zero, 1] == 1)
    assert np.all(x[~zero, 1] == 0) and np.all(x[~zero, 2 : 1 + gain.n_slots].sum(axis=1) == 1)
    decoded = encoder.inverse_transform(x)
    assert np.all(decoded.loc[zero, "gain"] == 0)
    spans = [s for s in encoder.spans if s.column == "gain"]
    assert [s.width for s in spans] == [1, gain.n_slots]
    # A generator's block that picks the mass slot decodes to exactly 0 whatever its scalar.
    fake = x[:5].copy()
    fake[:, 0], fake[:, 1 : 1 + gain.n_slots] = 0.7, 0.0
    fake[:, 1] = 1.0
    assert encoder.inverse_transform(fake)["gain"].tolist() == [0] * 5


def test_without_a_share_the_encoding_is_ctgans_as_before() -> None:
    """The default leaves the encoding, the random stream and the saved state unchanged."""
    frame, schema = _gain_table()
    plain = ModeSpecificEncoder(seed=0).fit(frame, schema)
    assert all(c.point_masses == () for c in plain._columns)
    state = plain.state_dict()
    assert "point_mass_share" not in state
    assert all("point_masses" not in entry for entry in state["numeric"].values())
    mixed = ModeSpecificEncoder(seed=0, point_mass_share=0.1).fit(frame, schema)
    # Age has no point mass: its columns encode identically in both (one draw a row each).
    a, b = plain.transform(frame), mixed.transform(frame)
    age_plain = a[:, plain._column_spans[1][0] : plain._column_spans[1][1]]
    age_mixed = b[:, mixed._column_spans[1][0] : mixed._column_spans[1][1]]
    np.testing.assert_array_equal(age_plain, age_mixed)


def test_the_mixed_state_round_trips_and_missing_values_still_work() -> None:
    frame, schema = _gain_table()
    frame["gain"] = frame["gain"].astype(float)
    frame.loc[:49, "gain"] = np.nan
    schema = Schema(
        (ColumnSpec("gain", ColumnKind.CONTINUOUS), ColumnSpec("age", ColumnKind.INTEGER))
    )
    encoder = ModeSpecificEncoder(seed=1, point_mass_share=0.1).fit(frame, schema)
    gain = encoder._columns[0]
    assert gain.has_missing and gain.point_masses == (0.0,)
    restored = ModeSpecificEncoder.from_state_dict(json.loads(json.dumps(encoder.state_dict())))
    rng = np.random.default_rng(3)
    x = encoder.transform(frame, np.random.default_rng(3))
    np.testing.assert_array_equal(restored.transform(frame, rng), x)
    decoded = restored.inverse_transform(x)
    assert decoded["gain"].isna().sum() == 50
    assert (decoded["gain"] == 0).sum() == (frame["gain"] == 0).sum()


@pytest.mark.parametrize("share", [0, 1, 1.5, True, "0.1"])
def test_a_bad_point_mass_share_is_refused(share: object) -> None:
    with pytest.raises(ValueError, match="point_mass_share must be None or in"):
        ModeSpecificEncoder(point_mass_share=share)  # type: ignore[arg-type]
