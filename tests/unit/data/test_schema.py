"""Tests for flwr_vflgan.data.schema."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.data.schema import ColumnKind, ColumnSpec, Schema, infer_schema

CONT, INT, CAT = ColumnKind.CONTINUOUS, ColumnKind.INTEGER, ColumnKind.CATEGORICAL


def make_schema() -> Schema:
    return Schema(
        (ColumnSpec("age", INT), ColumnSpec("city", CAT), ColumnSpec("score", CONT)),
        label="city",
    )


class TestColumnKind:
    def test_values(self) -> None:
        assert [kind.value for kind in ColumnKind] == ["continuous", "integer", "categorical"]

    def test_is_a_string_enum(self) -> None:
        assert isinstance(ColumnKind.INTEGER, str)
        assert ColumnKind.INTEGER == "integer"
        assert ColumnKind("categorical") is CAT


class TestColumnSpec:
    def test_kind_name_is_converted(self) -> None:
        assert ColumnSpec("x", "integer").kind is INT  # type: ignore[arg-type]

    def test_unknown_kind(self) -> None:
        with pytest.raises(
            ValueError, match=r"unknown column kind 'float' for column 'x'.*'continuous'"
        ):
            ColumnSpec("x", "float")  # type: ignore[arg-type]

    def test_name_must_be_string(self) -> None:
        with pytest.raises(TypeError, match="column name must be a str, got int"):
            ColumnSpec(3, INT)  # type: ignore[arg-type]

    def test_name_must_not_be_empty(self) -> None:
        with pytest.raises(ValueError, match="non-empty"):
            ColumnSpec("", INT)


class TestSchema:
    def test_names_and_kinds(self) -> None:
        schema = make_schema()
        assert schema.names == ["age", "city", "score"]
        assert schema.kind_of("score") is CONT
        assert schema.label == "city"

    def test_list_of_columns_becomes_tuple(self) -> None:
        schema = Schema([ColumnSpec("a", INT)])  # type: ignore[arg-type]
        assert schema.columns == (ColumnSpec("a", INT),)

    def test_kind_of_unknown_lists_valid_names(self) -> None:
        with pytest.raises(
            ValueError, match=r"unknown column 'height'.*\['age', 'city', 'score'\]"
        ):
            make_schema().kind_of("height")

    def test_duplicate_names(self) -> None:
        with pytest.raises(ValueError, match=r"unique; repeated: \['a'\]"):
            Schema((ColumnSpec("a", INT), ColumnSpec("b", CAT), ColumnSpec("a", CONT)))

    def test_label_must_be_a_column(self) -> None:
        with pytest.raises(ValueError, match="label 'y' is not a column"):
            Schema((ColumnSpec("a", INT),), label="y")

    def test_needs_a_column(self) -> None:
        with pytest.raises(ValueError, match="at least one column"):
            Schema(())

    def test_elements_must_be_column_specs(self) -> None:
        with pytest.raises(TypeError, match=r"columns\[1\] must be a ColumnSpec, got tuple"):
            Schema((ColumnSpec("a", INT), ("b", CAT)))  # type: ignore[arg-type]

    def test_subset_keeps_given_order_and_label(self) -> None:
        subset = make_schema().subset(["score", "city"])
        assert subset == Schema((ColumnSpec("score", CONT), ColumnSpec("city", CAT)), label="city")

    def test_subset_drops_label_not_included(self) -> None:
        subset = make_schema().subset(["age"])
        assert subset.names == ["age"]
        assert subset.label is None

    def test_subset_unknown(self) -> None:
        with pytest.raises(ValueError, match=r"unknown columns \['zip'\]"):
            make_schema().subset(["age", "zip"])

    def test_subset_rejects_a_bare_string(self) -> None:
        with pytest.raises(TypeError, match="got the string 'age'"):
            make_schema().subset("age")

    def test_to_dict_is_the_documented_json(self) -> None:
        expected = {
            "schema_version": 1,
            "columns": [
                {"name": "age", "kind": "integer"},
                {"name": "city", "kind": "categorical"},
                {"name": "score", "kind": "continuous"},
            ],
            "label": "city",
        }
        assert make_schema().to_dict() == expected

    def test_json_round_trip(self) -> None:
        schema = make_schema()
        assert Schema.from_dict(json.loads(json.dumps(schema.to_dict()))) == schema

    def test_from_dict_without_version_or_label(self) -> None:
        schema = Schema.from_dict({"columns": [{"name": "a", "kind": "integer"}]})
        assert schema == Schema((ColumnSpec("a", INT),))

    def test_from_dict_unknown_key(self) -> None:
        with pytest.raises(ValueError, match=r"unknown schema keys \['colums'\]"):
            Schema.from_dict({"colums": []})

    def test_from_dict_missing_columns(self) -> None:
        with pytest.raises(ValueError, match="no 'columns' key"):
            Schema.from_dict({"label": None})

    def test_from_dict_bad_version(self) -> None:
        with pytest.raises(ValueError, match="schema_version must be 1, got 2"):
            Schema.from_dict({"schema_version": 2, "columns": []})

    def test_from_dict_bad_entry(self) -> None:
        with pytest.raises(TypeError, match=r"columns\[0\] must be a mapping"):
            Schema.from_dict({"columns": [["a", "integer"]]})

    def test_from_dict_needs_mapping(self) -> None:
        with pytest.raises(TypeError, match="schema must be a mapping, got list"):
            Schema.from_dict([])  # type: ignore[arg-type]


class TestValidateFrame:
    def test_accepts_matching_frame_with_extra_columns(self) -> None:
        frame = pd.DataFrame({"extra": [0], "score": [0.5], "city": ["x"], "age": [3]})
        make_schema().validate_frame(frame)

    def test_missing_columns_are_named(self) -> None:
        with pytest.raises(ValueError, match=r"missing columns \['city', 'score'\]"):
            make_schema().validate_frame(pd.DataFrame({"age": [1]}))

    def test_numeric_kind_needs_numbers(self) -> None:
        frame = pd.DataFrame({"age": ["3"], "city": ["x"], "score": [0.5]})
        with pytest.raises(ValueError, match="column 'age' is declared integer but has dtype"):
            make_schema().validate_frame(frame)

    def test_numeric_kind_rejects_bool(self) -> None:
        frame = pd.DataFrame({"age": [True], "city": ["x"], "score": [0.5]})
        with pytest.raises(ValueError, match="declared integer but has dtype bool"):
            make_schema().validate_frame(frame)

    def test_integer_kind_needs_whole_numbers(self) -> None:
        frame = pd.DataFrame({"age": [3.0, 4.5, np.nan], "city": ["x"] * 3, "score": [0.5] * 3})
        with pytest.raises(
            ValueError, match=r"'age' is declared integer but has 1 non-integral.*4\.5"
        ):
            make_schema().validate_frame(frame)

    def test_needs_a_frame(self) -> None:
        with pytest.raises(TypeError, match="expected a pandas DataFrame, got dict"):
            make_schema().validate_frame({"age": [1]})


class TestInferSchema:
    def make_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "text": ["a", "b", None, "a"],
                "flag": [True, False, True, True],
                "group": pd.Categorical(["u", "v", "u", "u"]),
                "count": [1, 2, 3, 4],
                "whole_floats": [1.0, np.nan, 3.0, 4.0],
                "real": [0.5, 1.0, 1.5, 2.0],
            }
        )

    def test_rules(self) -> None:
        schema = infer_schema(self.make_frame())
        assert [(spec.name, spec.kind) for spec in schema.columns] == [
            ("text", CAT),
            ("flag", CAT),
            ("group", CAT),
            ("count", INT),
            ("whole_floats", INT),
            ("real", CONT),
        ]
        assert schema.label is None

    def test_declared_kinds_win(self) -> None:
        schema = infer_schema(
            self.make_frame(), {"count": "categorical", "whole_floats": CONT}, label="count"
        )
        assert schema.kind_of("count") is CAT
        assert schema.kind_of("whole_floats") is CONT
        assert schema.label == "count"

    def test_unknown_declared_kind(self) -> None:
        with pytest.raises(
            ValueError, match=r"unknown column kind 'text' for column 'real'.*valid"
        ):
            infer_schema(self.make_frame(), {"real": "text"})

    def test_declared_column_absent(self) -> None:
        with pytest.raises(ValueError, match=r"declared columns \['income'\] are not in the table"):
            infer_schema(self.make_frame(), {"income": "categorical"})

    def test_label_absent(self) -> None:
        with pytest.raises(ValueError, match="label 'income' is not in the table"):
            infer_schema(self.make_frame(), label="income")

    def test_too_many_text_values(self) -> None:
        frame = pd.DataFrame({"user": ["u1", "u2", "u3", "u4"]})
        with pytest.raises(
            ValueError, match=r"'user' has 4 distinct text values.*max_categories=3.*ID"
        ):
            infer_schema(frame, max_categories=3)

    def test_a_text_column_of_iso_dates_is_refused_as_dates(self) -> None:
        stamps = ["2020-01-01", "2020-01-02 10:30:00", " 2020-01-03T08:00:00+01:00", "", None]
        frame = pd.DataFrame({"Date": stamps})
        with pytest.raises(
            ValueError,
            match=r"column 'Date' holds dates \(3 distinct values such as '2020-01-01'\), "
            r"which are not modelled: leave it out \(dataset.drop=\[Date\]\)",
        ):
            infer_schema(frame, max_categories=2)
        # a few distinct dates stay categories, as any short list of text values does
        assert infer_schema(frame, max_categories=5).kind_of("Date") is CAT

    def test_text_that_only_looks_like_dates_keeps_the_id_message(self) -> None:
        for values in (
            ["2020-01-01", "2020-01-02", "2020-02-30"],  # no February 30th
            ["20200101", "20200102", "20200103"],  # compact: an ID as often as a date
            ["2020-01-01", "2020-01-02", "tomorrow"],
        ):
            with pytest.raises(ValueError, match=r"distinct text values.*ID or free text"):
                infer_schema(pd.DataFrame({"x": values}), max_categories=2)

    def test_a_column_that_numbers_the_rows_is_refused_as_an_id(self) -> None:
        ids = np.random.default_rng(0).permutation(np.arange(1, 31))
        frame = pd.DataFrame({"Id": ids, "x": np.linspace(0.0, 1.0, 30)})
        with pytest.raises(
            ValueError,
            match=r"column 'Id' numbers the rows \(30 distinct consecutive integers, 1 to 30\)"
            r".*dataset.id_column=Id.*dataset.declared=\{Id: integer\}",
        ):
            infer_schema(frame)
        # the same as whole floats (a CSV column with a blank elsewhere reads as float)
        with pytest.raises(ValueError, match="column 'Id' numbers the rows"):
            infer_schema(frame.astype({"Id": float}))

    def test_row_index_check_keeps_real_features(self) -> None:
        rng = np.random.default_rng(0)
        frame = pd.DataFrame(
            {
                "Id": np.arange(30),
                "gaps": rng.choice(1000, size=30, replace=False),  # distinct, not a run
                "repeats": np.arange(30) % 7,
            }
        )
        # declared, it stays a feature; distinct values with gaps and repeated values pass
        schema = infer_schema(frame, {"Id": "integer"})
        assert [schema.kind_of(c) for c in frame.columns] == [INT, INT, INT]
        # a short table is not judged
        assert infer_schema(frame.iloc[:19]).kind_of("Id") is INT

    def test_too_many_text_values_can_be_declared(self) -> None:
        frame = pd.DataFrame({"user": ["u1", "u2", "u3", "u4"]})
        assert infer_schema(frame, {"user": "categorical"}, max_categories=3).kind_of("user") is CAT

    def test_all_missing_float_is_continuous(self) -> None:
        frame = pd.DataFrame({"x": [np.nan, np.nan]})
        assert infer_schema(frame).kind_of("x") is CONT

    def test_infinite_float_is_continuous(self) -> None:
        frame = pd.DataFrame({"x": [1.0, np.inf]})
        assert infer_schema(frame).kind_of("x") is CONT

    def test_datetime_is_rejected(self) -> None:
        frame = pd.DataFrame({"when": pd.to_datetime(["2024-01-01", "2024-01-02"])})
        with pytest.raises(
            ValueError, match=r"column 'when' has dtype datetime64.*cannot be encoded"
        ):
            infer_schema(frame)

    def test_declared_numeric_on_text_fails(self) -> None:
        frame = pd.DataFrame({"x": ["1", "2"]})
        with pytest.raises(ValueError, match="column 'x' is declared integer but has dtype"):
            infer_schema(frame, {"x": "integer"})

    def test_non_string_column_names(self) -> None:
        with pytest.raises(TypeError, match="column names must be strings, got 0"):
            infer_schema(pd.DataFrame([[1, 2]]))

    def test_bad_max_categories(self) -> None:
        with pytest.raises(ValueError, match="max_categories must be >= 1, got 0"):
            infer_schema(self.make_frame(), max_categories=0)

    def test_needs_a_frame(self) -> None:
        with pytest.raises(TypeError, match="df must be a pandas DataFrame, got list"):
            infer_schema([1, 2])
