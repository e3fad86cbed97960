"""VFLGAN-TS on real nodes, the data side: the party files export_parties writes, a
party reading its own series file exactly as a simulated party encodes its block, the
public bounds of a domain, and the channels the server reads off published columns."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flwr_vflgan.clients.common import data_key, load_cached
from flwr_vflgan.data.domain import PublicDomain
from flwr_vflgan.data.files import domain_sidecar, write_series_party_files
from flwr_vflgan.data.series import SeriesEncoder, series_long_frame
from flwr_vflgan.data.series_files import wide_layout
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import (
    DataSpec,
    series_block,
    series_blocks,
    series_party_file,
    series_table,
)
from flwr_vflgan.simulations.config import ExportConfig
from flwr_vflgan.simulations.export_parties import export_parties

CHANNELS = ("a", "b")


def _domain(a: tuple[float, float], b: tuple[float, float]) -> PublicDomain:
    return PublicDomain.from_mapping(
        {
            "a": {"kind": "continuous", "min": a[0], "max": a[1]},
            "b": {"kind": "integer", "min": b[0], "max": b[1]},
        }
    )


def test_public_bounds_scale_each_channel_by_hand_and_clip_what_lies_outside() -> None:
    encoder = SeriesEncoder.from_domain(CHANNELS, 2, _domain((0.0, 10.0), (-4.0, 4.0)))
    assert encoder.public and not encoder.reads_private
    values = np.array([[[0.0, 5.0], [2.0, -4.0]], [[12.0, 10.0], [-6.0, 4.0]]], np.float32)
    # a: (x - 5) / 5; b: x / 4; 12 and -6 lie outside their bounds and are clipped.
    expected = np.array([[-1.0, 0.0, 0.5, -1.0], [1.0, 1.0, -1.0, 1.0]], np.float32)
    np.testing.assert_array_equal(encoder.encode(values), expected)
    decoded = encoder.inverse_transform(expected)
    assert list(decoded.columns) == ["a@0", "a@1", "b@0", "b@1"]
    np.testing.assert_array_equal(decoded.to_numpy()[0], [0.0, 5.0, 2.0, -4.0])
    # The bounds round-trip through the domain file format.
    again = SeriesEncoder.from_domain(CHANNELS, 2, encoder.domain())
    assert again == encoder


def test_a_fitted_scaling_reads_the_rows_and_the_identity_is_the_bounds_minus_one_one() -> None:
    values = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    assert SeriesEncoder.fitted(CHANNELS, values).reads_private
    identity = SeriesEncoder(CHANNELS, 2)
    assert not identity.reads_private
    bounded = SeriesEncoder.from_domain(CHANNELS, 2, identity.domain())
    assert bounded.low == (-1.0, -1.0) and bounded.high == (1.0, 1.0)
    inside = np.linspace(-0.9, 0.9, 8, dtype=np.float32).reshape(2, 2, 2)
    np.testing.assert_array_equal(bounded.encode(inside), identity.encode(inside))


@pytest.mark.parametrize(
    ("domain", "message"),
    [
        ({"a": {"kind": "continuous", "min": 0, "max": 1}}, "no numeric bounds for channel 'b'"),
        (
            {
                "a": {"kind": "continuous", "min": 0, "max": 1},
                "b": {"kind": "categorical", "categories": ["x"]},
            },
            "no numeric bounds for channel 'b'",
        ),
    ],
)
def test_a_domain_without_a_channels_bounds_is_refused(domain: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SeriesEncoder.from_domain(CHANNELS, 2, PublicDomain.from_mapping(domain))


@pytest.mark.parametrize("source", ["sine6", "basic_motions"])
def test_an_exported_party_file_encodes_exactly_as_the_simulated_party(
    tmp_path: Path, source: str
) -> None:
    """What makes a deployment publish the simulated run's series bit for bit: the
    sine data's identity scaling travels as public bounds [-1, 1] in a domain sidecar,
    BasicMotions' parties fit their own min-max on the same rows."""
    data = DataSpec(source=source, n_parties=2)
    result = export_parties(data, ExportConfig(out_dir=str(tmp_path / "parties")))
    manifest = json.loads(result.manifest.read_text())
    assert manifest["dataset"] == source and manifest["id_column"] == "series"
    table = series_table(data)
    for i, path in enumerate(result.data_files):
        assert path.name == f"party-{i}.csv"
        frame = pd.read_csv(path, nrows=2)
        held = [table.channels[c] for c in table.parties[i]]
        assert frame.columns[0] == "series" and wide_layout(frame.columns[1:]) == (
            tuple(held),
            table.length,
        )
        assert manifest["parties"][i]["channels"] == held
        sidecar = domain_sidecar(path)
        assert sidecar.is_file() == (source == "sine6"), sidecar
        deployed, simulated = series_party_file(path), series_block(data, i)
        assert deployed.encoder.channels == simulated.encoder.channels
        assert deployed.encoder.reads_private == (source == "basic_motions")
        assert np.array_equal(deployed.encoded.numpy(), simulated.encoded.numpy())
        assert deployed.id_digest == simulated.id_digest


def test_a_dataset_domain_scales_the_simulated_and_the_deployed_party_alike(
    tmp_path: Path,
) -> None:
    bounds = {"kind": "continuous", "min": -30.0, "max": 30.0}
    domain = {name: bounds for name in series_table(DataSpec(source="basic_motions")).channels}
    data = DataSpec(source="basic_motions", n_parties=2, domain=domain)
    blocks = series_blocks(data)
    assert all(b.encoder.public and b.encoder.low == (-30.0,) * 3 for b in blocks)  # type: ignore[union-attr]
    result = export_parties(data, ExportConfig(out_dir=str(tmp_path / "parties")))
    for path, block in zip(result.data_files, blocks, strict=True):
        sidecar = json.loads(domain_sidecar(path).read_text())
        assert sidecar == {name: {**bounds, "missing": False} for name in block.encoder.channels}  # type: ignore[union-attr]
        np.testing.assert_array_equal(series_party_file(path).encoded, block.encoded)


def test_a_party_reads_a_long_file_and_only_the_rows_it_is_given(tmp_path: Path) -> None:
    values = np.random.default_rng(0).normal(size=(5, 2, 3)).astype(np.float32)
    path = tmp_path / "mine.csv"
    series_long_frame(values, CHANNELS).to_csv(path, index=False)
    whole = series_party_file(path)
    assert whole.encoder.channels == CHANNELS and whole.n_rows == 5
    part = series_party_file(path, rows=[3, 1])
    expected = SeriesEncoder.fitted(CHANNELS, values[[3, 1]])
    assert part.encoder == expected and list(part.ids) == [3, 1]
    np.testing.assert_array_equal(part.encoded.numpy(), expected.encode(values[[3, 1]]))


def test_a_table_given_to_a_series_party_is_refused_with_the_layouts_named(
    tmp_path: Path,
) -> None:
    path = tmp_path / "party-0.csv"
    pd.DataFrame({"row_id": [0, 1], "age": [30, 40]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"is not a series file .* wide files \(series"):
        series_party_file(path)


class _Context:
    def __init__(self, path: Path) -> None:
        self.node_config = {P.NODE_DATA_PATH: str(path)}
        self.state: dict = {}


def test_a_deployed_party_reads_its_file_as_series_only_when_the_run_trains_series(
    tmp_path: Path,
) -> None:
    data = DataSpec(source="sine6", n_parties=2)
    result = export_parties(data, ExportConfig(out_dir=str(tmp_path / "parties")))
    context = _Context(result.data_files[0])
    key = data_key(context, "", 0, series=True)  # type: ignore[arg-type]
    assert json.loads(key) == {"file": str(result.data_files[0]), "series": True}
    loaded = load_cached(OrderedDict(), key, series_block)
    np.testing.assert_array_equal(loaded.encoded, series_block(data, 0).encoded)
    assert json.loads(data_key(context, "", 0)) == {"file": str(result.data_files[0])}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (["a@0", "a@1", "t"], "column 't' is not a series column"),
        (["a@0", "a@2"], r"channel 'a' has steps \[0, 2\]"),
        (["a@0", "a@1", "b@0"], r"channel 'b' has steps \[0\]"),
        ([], "no series columns"),
    ],
)
def test_published_columns_that_are_no_series_layout_are_refused(
    columns: list[str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        wide_layout(columns)


def test_series_party_files_are_written_all_or_nothing(tmp_path: Path) -> None:
    encoder = SeriesEncoder(CHANNELS, 3)
    values = np.zeros((4, 2, 3), np.float32)
    with pytest.raises(ValueError, match=r"different numbers of series: \[3, 4\]"):
        write_series_party_files("x", [(values, encoder), (values[:3], encoder)], tmp_path / "o")
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())
    out = tmp_path / "out"
    write_series_party_files("x", [(values, encoder)], out, file_format="parquet")
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json",
        "party-0.domain.json",
        "party-0.parquet",
    ]
    with pytest.raises(FileExistsError, match="not empty"):
        write_series_party_files("x", [(values, encoder)], out)
    assert series_party_file(out / "party-0.parquet").n_rows == 4
