"""Cut a dataset into one file per party, for a real deployment.

    python -m simulations.export_parties export.out_dir=parties
    python -m simulations.export_parties dataset=csv dataset.source=/data/table.csv \\
        partition.n_parties=3 partition=random seed=7 export.format=parquet export.out_dir=out

Composes the same config tree as ``python -m simulations.run`` (``dataset``,
``partition``, ``seed``) and splits the columns exactly as a simulated run of that
config does (:func:`~flwr_vflgan.runtime.party_data.split_columns`). Writes
``party-<i>.<csv|parquet>`` (a ``row_id`` column, then party ``i``'s columns),
``party-<i>.schema.json`` and ``manifest.json`` into ``export.out_dir``, then prints the
``flower-supernode`` command of every party and the ``flwr run`` command of the server
(see ``docs/deployment.md``). Series (``algorithm=vflgan_ts``) go out wide: ``party-<i>``
holds a ``series`` ID and the party's ``<channel>@<step>`` columns, with
``party-<i>.domain.json`` where its scaling is public rather than fitted. For split classification (``algorithm=gafm`` and its
baselines) the parties get the feature columns only and the label goes to
``labels.csv`` for the label party (the server), whose ``flwr run`` command names it.
"""

from __future__ import annotations

import json
import secrets
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import hydra
import pandas as pd
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.data import write_party_files
from flwr_vflgan.data.files import domain_sidecar, write_series_party_files
from flwr_vflgan.data.series import SeriesEncoder
from flwr_vflgan.gafm.data import feature_columns, spec_labels
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import (
    DataSpec,
    is_series_spec,
    load_full_table,
    series_blocks,
    series_table,
    split_columns,
)
from flwr_vflgan.simulations.cli import run_hydra_main
from flwr_vflgan.simulations.config import ExportConfig, _section, register_configs, to_run_spec

ID_COLUMN = "row_id"
"""The ID column of the party files: the name a party's ``load_party_file`` expects."""
CONFIG_NAME = "export_parties"
_SEED_BOUND = 2**62  # fits TOML's signed 64-bit integers in --node-config


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_parties` wrote."""

    dataset: str
    n_rows: int
    out_dir: Path
    data_files: list[Path]
    sidecar_files: list[Path]
    """The files beside the data files that each party also gets: its schema
    (tables) and its public bounds (``party-<i>.domain.json``, where written)."""
    manifest: Path
    columns: list[list[str]]
    labels_file: Path | None = None
    """Split classification: the label party's ``labels.csv`` (row ID, label)."""
    id_column: str = ID_COLUMN
    """The files' ID column (``series`` for series)."""


def export_parties(data: DataSpec, export: ExportConfig, label_party: bool = False) -> ExportResult:
    """Write the party files of ``data``'s table under its column split.

    Parameters
    ----------
    data
        The table and its partition, as a simulated run of the same config uses them.
    export
        Where and how to write.
    label_party
        Split classification (``algorithm=gafm|splitnn|maxnorm|marvell``): the parties
        get the feature columns only (:func:`~flwr_vflgan.gafm.data.feature_columns`), and
        the label goes to ``labels.csv`` (``row_id``, label) for the label party.

    Returns
    -------
    ExportResult
        The files written, in party order.

    Raises
    ------
    ValueError
        If ``export.out_dir`` is missing or is a file, or the dataset or partition is invalid.
    FileExistsError
        If ``export.out_dir`` is not empty and ``export.overwrite`` is false.
    FileNotFoundError
        If the dataset's file is not on this machine.
    """
    if export.out_dir is None:
        raise ValueError(
            "export.out_dir is required: where to write the party files, "
            "e.g. export.out_dir=parties"
        )
    out_dir = Path(export.out_dir).expanduser().resolve()
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"export.out_dir {out_dir} exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not export.overwrite:
        raise FileExistsError(
            f"export.out_dir {out_dir} exists and is not empty; choose another folder or "
            "pass export.overwrite=true to replace its contents"
        )
    if is_series_spec(data):
        return _export_series(data, export, out_dir)
    dataset, ids = load_full_table(data)
    columns = feature_columns(data) if label_party else split_columns(data, dataset.schema)
    data_files = write_party_files(
        dataset,
        columns,
        out_dir,
        id_column=ID_COLUMN,
        ids=ids,
        file_format=export.format,
        overwrite=export.overwrite,
        domain=data.public_domain,
    )
    labels_path = None
    if label_party:
        _, _, label = spec_labels(data)
        labels_path = out_dir / "labels.csv"
        frame = pd.DataFrame({ID_COLUMN: ids.to_numpy(), label: dataset.frame[label].to_numpy()})
        write_atomically(labels_path, lambda tmp: frame.to_csv(tmp, index=False))
    return ExportResult(
        labels_file=labels_path,
        dataset=dataset.name,
        n_rows=dataset.n_rows,
        out_dir=out_dir,
        data_files=data_files,
        sidecar_files=_sidecars(out_dir, data_files, ("schema",)),
        manifest=out_dir / "manifest.json",
        columns=columns,
    )


def _sidecars(out_dir: Path, data_files: list[Path], always: tuple[str, ...] = ()) -> list[Path]:
    """Each party's ``party-<i>.<kind>.json`` of the ``always`` kinds, and its domain
    sidecar where one was written, in party order."""
    found = []
    for i, data_file in enumerate(data_files):
        found += [out_dir / f"party-{i}.{kind}.json" for kind in always]
        if domain_sidecar(data_file).is_file():
            found.append(domain_sidecar(data_file))
    return found


def _export_series(data: DataSpec, export: ExportConfig, out_dir: Path) -> ExportResult:
    """VFLGAN-TS's party files: each party's channels, wide (``series``, then
    ``<channel>@<step>``), with its public bounds where its scaling is not fitted."""
    table = series_table(data)
    blocks = series_blocks(data)
    parties = []
    for held, block in zip(table.parties, blocks, strict=True):
        assert isinstance(block.encoder, SeriesEncoder)  # series_blocks builds them
        parties.append((table.values[:, list(held), :], block.encoder))
    files = write_series_party_files(
        data.source, parties, out_dir, file_format=export.format, overwrite=export.overwrite
    )
    return ExportResult(
        dataset=data.source,
        n_rows=table.n_series,
        out_dir=out_dir,
        data_files=files,
        sidecar_files=_sidecars(out_dir, files),
        manifest=out_dir / "manifest.json",
        columns=[[table.channels[c] for c in held] for held in table.parties],
        id_column="series",
    )


def node_config_text(
    partition_id: int, n_parties: int, data_path: Path, shared_seed: int | None
) -> str:
    """A party's ``--node-config`` value: its partition, its file and the shared seed
    (none where the parties agree on one: ``runtime.key_agreement``)."""
    if '"' in str(data_path):
        raise ValueError(f'party file path {data_path} contains a double quote (")')
    seed = "" if shared_seed is None else f" {P.NODE_SHARED_SEED}={shared_seed}"
    return (
        f"{P.NODE_PARTITION_ID}={partition_id} num-partitions={n_parties} "
        f"{P.NODE_DATA_PATH}={json.dumps(str(data_path))}{seed}"
    )


def supernode_command(
    partition_id: int, n_parties: int, data_path: Path, shared_seed: int, superlink: str
) -> str:
    """The ``flower-supernode`` command line of one party (``--port`` differs per party
    so that all of them can also run on one machine)."""
    node_config = node_config_text(partition_id, n_parties, data_path, shared_seed)
    return (
        f"flower-supernode --insecure --superlink {superlink} --port {9094 + partition_id} "
        f"--node-config {shlex.quote(node_config)}"
    )


def party_node_command(
    partition_id: int, n_parties: int, data_path: Path, shared_seed: int, superlink: str
) -> str:
    """The ``flwr-vflgan-node`` command line of one party: the same node config as its
    ``flower-supernode`` line, served from one long-lived process."""
    stock = shlex.split(
        supernode_command(partition_id, n_parties, data_path, shared_seed, superlink)
    )
    node_config = stock[stock.index("--node-config") + 1]
    return (
        f"flwr-vflgan-node --insecure --superlink {superlink} "
        f"--node-config {shlex.quote(node_config)}"
    )


def flwr_run_command(overrides: list[str]) -> str:
    """The server's ``flwr run`` command for a deployment with these Hydra overrides."""
    run_overrides = shlex.join(["runtime=deployment", "output.evaluate=false", *overrides])
    run_config = f"overrides={json.dumps(run_overrides)} run-dir={json.dumps('outputs/deploy')}"
    return f"flwr run . <federation> --run-config {shlex.quote(run_config)}"


def written_lines(result: ExportResult) -> list[str]:
    """What was written: the dataset, and each party's file and the files beside it."""
    series = result.id_column == "series"
    lines = [
        f"flwr-vflgan: wrote {result.dataset} ({result.n_rows} "
        f"{'series' if series else 'rows'}) for {len(result.data_files)} parties "
        f"to {result.out_dir}",
    ]
    for i, data_file in enumerate(result.data_files):
        held = f"{len(result.columns[i])} {'channels' if series else 'columns'}"
        lines.append(f"  party {i}: {data_file}  ({held} + {result.id_column})")
        lines += [
            f"           {s}" for s in result.sidecar_files if s.name.startswith(f"party-{i}.")
        ]
    return lines


def report(
    result: ExportResult,
    export: ExportConfig,
    shared_seed: int,
    overrides: list[str],
    stream: TextIO,
) -> None:
    """Print the files written and the commands that start the deployment."""
    n_parties = len(result.data_files)
    host = export.superlink.rpartition(":")[0]
    lines = written_lines(result)
    if result.labels_file is not None:
        lines.append(f"  labels (the label party's, i.e. the server's, only): {result.labels_file}")
        overrides = [*overrides, f"gafm.labels_path={result.labels_file}"]
    lines += [
        f"  manifest: {result.manifest}",
        "",
        "Give each party its own data file and the files beside it named above (and nothing",
        "else).",
        "All parties must use one secret shared-seed that the server never learns; choose it",
        "yourselves or use this freshly generated one, and pass it to the parties privately:",
        f"  {shared_seed}",
        "",
        "Start the SuperLink (server machine), then one SuperNode per party (data-path is the",
        "party's own copy of its file):",
        f"  flower-superlink --insecure --host {host} --port {export.superlink.rpartition(':')[2]}"
        " --disable-runtime-dependency-installation",
    ]
    lines += [
        "  " + supernode_command(i, n_parties, path, shared_seed, export.superlink)
        for i, path in enumerate(result.data_files)
    ]
    lines += [
        "",
        "or, for runs that finish in minutes rather than days, one long-lived party node each",
        "(the same SuperLink and messages; the party's models stay in memory):",
    ]
    lines += [
        "  " + party_node_command(i, n_parties, path, shared_seed, export.superlink)
        for i, path in enumerate(result.data_files)
    ]
    lines += [
        "",
        "Then launch the run from this checkout (a [superlink.<federation>] entry in",
        "$FLWR_HOME/config.toml names the SuperLink):",
        "  FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 " + flwr_run_command(overrides),
        "",
        "--insecure sends everything unencrypted: use it on one machine (127.0.0.1) only;",
        "across machines run the SuperLink with TLS (docs/deployment.md).",
    ]
    print("\n".join(lines), file=stream, flush=True)


def _task_overrides() -> list[str]:
    """The command line's overrides except ``export.*`` (they also apply to the run)."""
    try:
        task = list(HydraConfig.get().overrides.task)
    except ValueError:  # not under @hydra.main
        return []
    return [o for o in task if not o.lstrip("+~").startswith("export.")]


def _export_config(cfg: DictConfig) -> ExportConfig:
    values = _section(cfg, "export", ExportConfig)
    if values.get("out_dir") is not None:
        values["out_dir"] = str(values["out_dir"])  # export.out_dir=2024 parses as an int
    return ExportConfig(**values)


def register_export_config() -> None:
    """Register the primary config: the run tree, and Hydra writing no files of its own."""
    register_configs()
    node = {
        "defaults": [
            "config",
            {"override hydra/job_logging": "stdout"},
            "_self_",
        ],
        "hydra": {
            "run": {"dir": "."},
            "output_subdir": None,
            "job_logging": {
                "root": {"level": "WARNING"},
                "handlers": {"console": {"stream": "ext://sys.stderr"}},
            },
        },
    }
    ConfigStore.instance().store(name=CONFIG_NAME, node=OmegaConf.create(node))


register_export_config()


@hydra.main(config_path="pkg://flwr_vflgan.conf", config_name=CONFIG_NAME, version_base=None)
def main(cfg: DictConfig) -> None:
    """Hydra entry point; exits with status 2 and a one-line reason on bad input."""
    try:
        export = _export_config(cfg)
        spec = to_run_spec(cfg, Path.cwd())
        result = export_parties(spec.data, export, label_party=spec.algorithm.is_gafm)
    except (ValueError, TypeError, FileExistsError, FileNotFoundError) as exc:
        print(f"export_parties: error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    report(result, export, secrets.randbelow(_SEED_BOUND), _task_overrides(), sys.stdout)


if __name__ == "__main__":
    sys.exit(run_hydra_main("simulations.export_parties", main))
