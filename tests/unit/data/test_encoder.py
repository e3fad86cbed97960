"""Tests for flwr_vflgan.data.encoder."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.encoder import Span, TabularEncoder
from flwr_vflgan.data.registry import load_dataset
from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema

CONT, INT, CAT = ColumnKind.CONTINUOUS, ColumnKind.INTEGER, ColumnKind.CATEGORICAL
TINY_SCHEMA = Schema((ColumnSpec("a", CONT), ColumnSpec("b", CAT), ColumnSpec("c", INT)))


def tiny_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {"a": [1.0, 2.0, 3.0, 4.0], "b": ["y", "x", "y", None], "c": [10, 20, 20, 30]}
    )


class TestTinyFrame:
    def test_spans_and_output_dim(self) -> None:
        encoder = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA)
        # b has categories x, y and a missing slot.
        assert encoder.spans == (
            Span("a", 0, 1, "identity"),
            Span("b", 1, 3, "gumbel_softmax"),
            Span("c", 4, 1, "identity"),
        )
        assert encoder.output_dim == 5
        assert encoder.schema == TINY_SCHEMA

    def test_standardisation_by_hand(self) -> None:
        x = TabularEncoder().fit_transform(tiny_frame(), TINY_SCHEMA)
        assert x.dtype == np.float32 and x.shape == (4, 5)
        # a: mean 2.5, population std sqrt(((1.5)^2 + (0.5)^2) * 2 / 4) = sqrt(1.25).
        std_a = math.sqrt(1.25)
        expected_a = [-1.5 / std_a, -0.5 / std_a, 0.5 / std_a, 1.5 / std_a]
        # c: mean 20, population std sqrt((100 + 0 + 0 + 100) / 4) = sqrt(50).
        expected_c = [-10 / math.sqrt(50), 0.0, 0.0, 10 / math.sqrt(50)]
        np.testing.assert_allclose(x[:, 0], expected_a, rtol=1e-6)
        np.testing.assert_allclose(x[:, 4], expected_c, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(x[:, 1:4], [[0, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])

    def test_minmax_by_hand(self) -> None:
        encoder = TabularEncoder("minmax")
        x = encoder.fit_transform(tiny_frame(), TINY_SCHEMA)
        np.testing.assert_allclose(x[:, 0], [-1, -1 / 3, 1 / 3, 1], rtol=1e-6)
        np.testing.assert_allclose(x[:, 4], [-1, 0, 0, 1], atol=1e-7)
        assert [span.activation for span in encoder.spans] == ["tanh", "gumbel_softmax", "tanh"]

    def test_round_trip_with_missing_category(self) -> None:
        frame = tiny_frame()
        encoder = TabularEncoder().fit(frame, TINY_SCHEMA)
        back = encoder.inverse_transform(encoder.transform(frame))
        assert back["b"].tolist()[:3] == ["y", "x", "y"]
        assert pd.isna(back["b"].iloc[3])
        assert back["c"].tolist() == [10, 20, 20, 30]
        assert back["c"].dtype == np.int64
        np.testing.assert_allclose(back["a"], [1.0, 2.0, 3.0, 4.0], rtol=1e-6)

    def test_inverse_rounds_clips_and_takes_argmax(self) -> None:
        encoder = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA)
        std_a, std_c = math.sqrt(1.25), math.sqrt(50)
        generated = np.array(
            [
                [100.0, 0.2, 0.7, 0.1, (21.4 - 20) / std_c],  # a clipped to max 4, c 21.4 -> 21
                [-100.0, 2.0, -1.0, 0.5, -100.0],  # a clipped to min 1, c clipped to 10
                [(2.75 - 2.5) / std_a, 0.0, 0.1, 0.3, (26.6 - 20) / std_c],  # missing slot wins
            ]
        )
        back = encoder.inverse_transform(generated)
        assert back["c"].tolist() == [21, 10, 27]
        np.testing.assert_allclose(back["a"], [4.0, 1.0, 2.75])
        assert back["b"].tolist()[:2] == ["y", "x"] and pd.isna(back["b"].iloc[2])

    def test_constant_columns(self) -> None:
        frame = pd.DataFrame({"k": [5.0, 5.0], "j": [7, 7]})
        schema = Schema((ColumnSpec("k", CONT), ColumnSpec("j", INT)))
        for scaling in ("standard", "minmax"):
            encoder = TabularEncoder(scaling)
            x = encoder.fit_transform(frame, schema)
            np.testing.assert_array_equal(x, np.zeros((2, 2)))
            pd.testing.assert_frame_equal(encoder.inverse_transform(x), frame)


class TestDtypes:
    def test_original_dtypes_come_back(self) -> None:
        frame = pd.DataFrame(
            {
                "code": [1, 2, 1],
                "flag": [True, False, True],
                "level": pd.Categorical(["lo", "hi", "lo"], categories=["lo", "mid", "hi"]),
                "name": pd.Series(["u", "v", "u"], dtype=object),
                "small": np.array([3, 4, 5], dtype=np.int32),
                "single": np.array([0.25, 0.5, 1.0], dtype=np.float32),
                "whole": [1.0, 2.0, 3.0],
            }
        )
        schema = Schema(
            (
                ColumnSpec("code", CAT), ColumnSpec("flag", CAT), ColumnSpec("level", CAT),
                ColumnSpec("name", CAT), ColumnSpec("small", INT), ColumnSpec("single", CONT),
                ColumnSpec("whole", INT),
            )
        )  # fmt: skip
        encoder = TabularEncoder().fit(frame, schema)
        back = encoder.inverse_transform(encoder.transform(frame))
        expected = frame.assign(whole=np.array([1, 2, 3], dtype=np.int64))
        pd.testing.assert_frame_equal(back, expected)
        assert type(back["code"].iloc[0]) in (int, np.int64)

    def test_categories_sorted_by_string(self) -> None:
        frame = pd.DataFrame({"n": [10, 9, 2]})
        encoder = TabularEncoder().fit(frame, Schema((ColumnSpec("n", CAT),)))
        # "10" < "2" < "9" as strings.
        np.testing.assert_array_equal(encoder.transform(frame), [[1, 0, 0], [0, 0, 1], [0, 1, 0]])


class TestErrors:
    def test_a_numeric_column_without_any_value(self) -> None:
        frame = tiny_frame().assign(a=[np.nan] * 4)
        with pytest.raises(ValueError, match=r"numeric column 'a' has no values at all"):
            TabularEncoder().fit(frame, TINY_SCHEMA)

    def test_numeric_missing_in_transform(self) -> None:
        encoder = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA)
        with pytest.raises(ValueError, match="column 'a' has 1 missing values"):
            encoder.transform(tiny_frame().assign(a=[1.0, 2.0, np.nan, 4.0]))

    def test_numeric_infinite(self) -> None:
        frame = tiny_frame().assign(a=[1.0, np.inf, 3.0, -np.inf])
        with pytest.raises(ValueError, match=r"column 'a' has 2 non-finite values \(inf\)"):
            TabularEncoder().fit(frame, TINY_SCHEMA)

    def test_unseen_category(self) -> None:
        encoder = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA)
        with pytest.raises(
            ValueError, match=r"column 'b' has 1 values not seen at fit time, e\.g\. \['w'\]"
        ):
            encoder.transform(tiny_frame().assign(b=["x", "w", "y", "x"]))

    def test_missing_category_not_seen_at_fit(self) -> None:
        frame = tiny_frame().assign(b=["x", "y", "x", "y"])
        encoder = TabularEncoder().fit(frame, TINY_SCHEMA)
        with pytest.raises(ValueError, match="column 'b' has 1 missing values, but had none"):
            encoder.transform(tiny_frame())

    def test_missing_columns(self) -> None:
        encoder = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA)
        with pytest.raises(ValueError, match=r"missing columns \['c'\]"):
            encoder.transform(tiny_frame().drop(columns=["c"]))

    def test_empty_frame(self) -> None:
        with pytest.raises(ValueError, match="0 rows"):
            TabularEncoder().fit(tiny_frame().iloc[:0], TINY_SCHEMA)

    def test_schema_type(self) -> None:
        with pytest.raises(TypeError, match="schema must be a Schema, got list"):
            TabularEncoder().fit(tiny_frame(), ["a"])  # type: ignore[arg-type]

    def test_inverse_wrong_shape(self) -> None:
        encoder = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA)
        with pytest.raises(ValueError, match=r"shape \(n_rows, 5\).*got \(2, 4\)"):
            encoder.inverse_transform(np.zeros((2, 4)))
        with pytest.raises(ValueError, match=r"got \(5,\)"):
            encoder.inverse_transform(np.zeros(5))

    def test_inverse_non_finite(self) -> None:
        encoder = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA)
        x = np.zeros((2, 5))
        x[1, 2] = np.nan
        with pytest.raises(ValueError, match="x has 1 NaN or infinite values"):
            encoder.inverse_transform(x)

    def test_inverse_non_numeric(self) -> None:
        encoder = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA)
        with pytest.raises(TypeError, match="x must be a numeric array"):
            encoder.inverse_transform(np.full((1, 5), "a"))

    def test_not_fitted(self) -> None:
        encoder = TabularEncoder()
        for action in (lambda: encoder.spans, lambda: encoder.state_dict()):
            with pytest.raises(ValueError, match="not fitted yet"):
                action()
        with pytest.raises(ValueError, match="not fitted yet"):
            encoder.transform(tiny_frame())

    def test_unknown_scaling(self) -> None:
        with pytest.raises(
            ValueError, match=r"numeric_scaling must be one of \['standard', 'minmax', 'quantile'\]"
        ):
            TabularEncoder("robust")  # type: ignore[arg-type]

    def test_span_validation(self) -> None:
        with pytest.raises(ValueError, match="width must be >= 1, got 0"):
            Span("a", 0, 0, "identity")
        with pytest.raises(ValueError, match="activation must be one of"):
            Span("a", 0, 1, "softmax")  # type: ignore[arg-type]


class TestStateDict:
    def test_json_round_trip(self) -> None:
        frame = tiny_frame()
        encoder = TabularEncoder("minmax").fit(frame, TINY_SCHEMA)
        state = json.loads(json.dumps(encoder.state_dict()))
        assert state["schema_version"] == 3 and state["quantiles"] == {}
        assert state["means"] == {"a": 2.5, "c": 20.0}
        assert state["mins"] == {"a": 1.0, "c": 10.0} and state["maxes"] == {"a": 4.0, "c": 30.0}
        assert state["categories"] == {"b": ["x", "y"]}
        restored = TabularEncoder.from_state_dict(state)
        assert restored.spans == encoder.spans
        x = encoder.transform(frame)
        np.testing.assert_array_equal(restored.transform(frame), x)
        pd.testing.assert_frame_equal(restored.inverse_transform(x), encoder.inverse_transform(x))

    def test_bad_version(self) -> None:
        state = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA).state_dict()
        with pytest.raises(ValueError, match="schema_version must be 3, got 0"):
            TabularEncoder.from_state_dict({**state, "schema_version": 0})

    def test_missing_key(self) -> None:
        state = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA).state_dict()
        del state["stds"]
        with pytest.raises(ValueError, match=r"missing \['stds'\]"):
            TabularEncoder.from_state_dict(state)

    def test_invalid_statistic(self) -> None:
        state = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA).state_dict()
        state["stds"]["a"] = 0.0
        with pytest.raises(ValueError, match=r"column 'a' is invalid.*std=0\.0"):
            TabularEncoder.from_state_dict(state)

    def test_column_entry_missing(self) -> None:
        state = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA).state_dict()
        del state["categories"]["b"]
        with pytest.raises(ValueError, match="no 'categories' entry for column 'b'"):
            TabularEncoder.from_state_dict(state)


class TestQuantileScaling:
    """``numeric_scaling="quantile"``: ``Phi^-1(F(x))`` with the empirical CDF."""

    def test_by_hand(self) -> None:
        from scipy.special import ndtri

        encoder = TabularEncoder("quantile")
        x = encoder.fit_transform(tiny_frame(), TINY_SCHEMA)
        # a = 1, 2, 3, 4: four reference quantiles at levels 0, 1/3, 2/3, 1; the ends are
        # clipped to 1e-7 so they stay finite.
        levels = np.clip([0, 1 / 3, 2 / 3, 1], 1e-7, 1 - 1e-7)
        np.testing.assert_allclose(x[:, 0], ndtri(levels), rtol=1e-6)
        # c = 10, 20, 20, 30: the tied 20s span levels 1/3 and 2/3 and take the middle, 0.
        np.testing.assert_allclose(x[:, 4], [ndtri(1e-7), 0.0, 0.0, -ndtri(1e-7)], atol=1e-6)
        assert [span.activation for span in encoder.spans] == [
            "identity",
            "gumbel_softmax",
            "identity",
        ]
        decoded = encoder.inverse_transform(x)
        pd.testing.assert_frame_equal(decoded[["a", "c"]], tiny_frame()[["a", "c"]])

    def test_a_point_mass_and_a_long_tail_come_back_from_normal_draws(self) -> None:
        """A column that is 0 in 90% of rows with a heavy tail otherwise: standard normal
        draws decode to about 90% zeros and the real tail, which a standardised column
        (a normal draw times the std) cannot give."""
        rng = np.random.default_rng(0)
        values = np.where(rng.random(20_000) < 0.9, 0.0, rng.pareto(1.5, 20_000) * 1000)
        schema = Schema((ColumnSpec("gain", CONT),))
        frame = pd.DataFrame({"gain": values})
        encoder = TabularEncoder("quantile").fit(frame, schema)
        encoded = encoder.transform(frame)
        assert np.unique(encoded[values == 0, 0]).size == 1  # one value for the mass
        decoded = encoder.inverse_transform(rng.standard_normal((20_000, 1)))["gain"]
        assert (decoded == 0).mean() == pytest.approx(0.9, abs=0.01)
        for level in (0.95, 0.99):
            real, synthetic = np.quantile(values, level), np.quantile(decoded, level)
            assert synthetic == pytest.approx(real, rel=0.1)
        standard = TabularEncoder().fit(frame, schema)
        plain = standard.inverse_transform(rng.standard_normal((20_000, 1)))["gain"]
        assert (plain == 0).mean() < 0.6  # clipped at the minimum: half the draws

    def test_round_trip_of_adult_is_exact_but_for_interpolation(self) -> None:
        adult = load_dataset("adult")
        encoder = TabularEncoder("quantile").fit(adult.frame, adult.schema)
        decoded = encoder.inverse_transform(encoder.transform(adult.frame))
        for column in ("age", "education-num", "capital-gain", "capital-loss", "hours-per-week"):
            pd.testing.assert_series_equal(decoded[column], adult.frame[column])
        # fnlwgt has about 21,000 distinct values: between two of the 1,000 reference
        # quantiles a value comes back interpolated, within 0.1% of itself.
        error = (decoded["fnlwgt"] - adult.frame["fnlwgt"]).abs() / adult.frame["fnlwgt"]
        assert (error == 0).mean() > 0.99 and error.max() < 1e-3

    def test_missing_values_keep_their_indicator(self) -> None:
        frame = pd.DataFrame({"a": [1.0, np.nan, 3.0, 4.0, np.nan]})
        schema = Schema((ColumnSpec("a", CONT),))
        encoder = TabularEncoder("quantile").fit(frame, schema)
        x = encoder.transform(frame)
        np.testing.assert_array_equal(x[[1, 4]], [[0, 0, 1], [0, 0, 1]])
        pd.testing.assert_frame_equal(encoder.inverse_transform(x), frame)

    def test_state_round_trip_and_validation(self) -> None:
        encoder = TabularEncoder("quantile").fit(tiny_frame(), TINY_SCHEMA)
        state = json.loads(json.dumps(encoder.state_dict()))
        assert state["quantiles"] == {"a": [1.0, 2.0, 3.0, 4.0], "c": [10.0, 20.0, 20.0, 30.0]}
        restored = TabularEncoder.from_state_dict(state)
        np.testing.assert_array_equal(
            restored.transform(tiny_frame()), encoder.transform(tiny_frame())
        )
        for bad in ([], [1.0, 3.0, 2.0, 4.0], [0.0, 2.0, 3.0, 4.0], [1.0, float("nan")]):
            with pytest.raises(ValueError, match=r"column 'a' has invalid quantiles"):
                TabularEncoder.from_state_dict(
                    {**state, "quantiles": {**state["quantiles"], "a": bad}}
                )

    def test_a_version_2_state_still_loads(self) -> None:
        encoder = TabularEncoder().fit(tiny_frame(), TINY_SCHEMA)
        state = encoder.state_dict()
        del state["quantiles"]
        restored = TabularEncoder.from_state_dict({**state, "schema_version": 2})
        np.testing.assert_array_equal(
            restored.transform(tiny_frame()), encoder.transform(tiny_frame())
        )


class TestRealData:
    def test_adult_round_trip_is_exact(self) -> None:
        adult = load_dataset("adult")
        encoder = TabularEncoder().fit(adult.frame, adult.schema)
        # adult.names: workclass 8, education 16, marital-status 7, occupation 14,
        # relationship 6, race 5, sex 2, native-country 41 values, income 2; "?" adds a
        # missing slot to workclass, occupation and native-country; plus 6 integers.
        assert encoder.output_dim == (8 + 1) + 16 + 7 + (14 + 1) + 6 + 5 + 2 + (41 + 1) + 2 + 6
        x = encoder.transform(adult.frame)
        assert x.shape == (48_842, encoder.output_dim)
        pd.testing.assert_frame_equal(encoder.inverse_transform(x), adult.frame)

    def test_german_credit_round_trip_is_exact(self, datasets_dir: Path) -> None:
        german = load_dataset("german_credit", data_dir=datasets_dir)
        encoder = TabularEncoder().fit(german.frame, german.schema)
        back = encoder.inverse_transform(encoder.transform(german.frame))
        pd.testing.assert_frame_equal(back, german.frame)

    def test_spambase_continuous_round_trip(self, datasets_dir: Path) -> None:
        spam = load_dataset("spambase", data_dir=datasets_dir)
        encoder = TabularEncoder().fit(spam.frame, spam.schema)
        back = encoder.inverse_transform(encoder.transform(spam.frame))
        assert back["spam"].tolist() == spam.frame["spam"].tolist()
        for name in spam.schema.names[:57]:
            original = spam.frame[name].to_numpy()
            span = original.max() - original.min()
            np.testing.assert_allclose(back[name], original, rtol=1e-5, atol=1e-6 * span)


class TestNumericMissingness:
    """A numeric column with gaps: [value, present, missing], stats from present values."""

    def test_fit_transform_and_decode(self) -> None:
        frame = tiny_frame().assign(a=[1.0, np.nan, np.nan, 5.0])
        encoder = TabularEncoder().fit(frame, TINY_SCHEMA)
        (span,) = [s for s in encoder.spans if s.column == "a"]
        assert span.width == 3 and span.activation == "identity_missing"
        block = encoder.transform(frame)[:, span.start : span.stop]
        # mean 3, std 2 of the present values; missing rows encode to 0 and [0, 1].
        np.testing.assert_allclose(block, [[-1, 1, 0], [0, 0, 1], [0, 0, 1], [1, 1, 0]])
        decoded = encoder.inverse_transform(encoder.transform(frame))
        np.testing.assert_array_equal(decoded["a"].to_numpy(), [1.0, np.nan, np.nan, 5.0])
        restored = TabularEncoder.from_state_dict(encoder.state_dict())
        assert restored.spans == encoder.spans

    def test_integer_columns_with_gaps_decode_rounded_floats(self) -> None:
        schema = Schema((ColumnSpec("n", "integer"),))
        frame = pd.DataFrame({"n": [1.0, 2.0, np.nan, 4.0]})
        encoder = TabularEncoder().fit(frame, schema)
        out = encoder.inverse_transform(np.array([[0.1, 1, 0], [0.4, 0.2, 0.9]]))
        assert out["n"].dtype == np.float64
        assert out["n"].iloc[0] == round(out["n"].iloc[0]) and np.isnan(out["n"].iloc[1])

    def test_minmax_scaling_uses_tanh_with_the_indicator(self) -> None:
        frame = tiny_frame().assign(a=[1.0, np.nan, 3.0, 5.0])
        encoder = TabularEncoder("minmax").fit(frame, TINY_SCHEMA)
        (span,) = [s for s in encoder.spans if s.column == "a"]
        assert span.activation == "tanh_missing"
