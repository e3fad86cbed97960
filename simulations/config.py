"""Hydra configuration: the ``base`` node built from the dataclass defaults, and the
conversion of a composed config into the validated dataclasses the code below takes.

Hydra stops here: :func:`to_run_spec` turns the DictConfig into frozen dataclasses, and
nothing below ``simulations`` ever sees a DictConfig.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.config import ModelConfig, TrainConfig, Variant, VFLGANConfig, parse_variant
from flwr_vflgan.data.domain import PublicDomain, required_domain, resolve_domain
from flwr_vflgan.data.series import SERIES_DATASETS, is_series_source
from flwr_vflgan.dplt.config import DPLTSettings
from flwr_vflgan.evaluation import EvaluationConfig
from flwr_vflgan.gafm.config import GAFMSettings
from flwr_vflgan.gan.config import GSWGANSettings
from flwr_vflgan.latent.config import LatentSettings
from flwr_vflgan.marginals.config import MarginalSettings
from flwr_vflgan.privacy import DPConfig, Mechanism
from flwr_vflgan.runtime.party_data import FITTED_ONLY, DataSpec
from flwr_vflgan.series.config import SeriesSettings
from flwr_vflgan.strategies.exchange import DEFAULT_POLL_INTERVAL
from flwr_vflgan.vtgan.config import VTGANSettings

RuntimeKind = Literal["inprocess", "simulation", "deployment"]
_RUNTIMES = ("inprocess", "simulation", "deployment")
FEDERATED_GANS = (Variant.VFLGAN, Variant.VFLGAN_BASE, Variant.VERTIGAN)
"""The VFLGAN family's federated algorithms (its strategy and party client)."""


@dataclass(frozen=True)
class RuntimeConfig:
    """Where the ServerApp and ClientApps run.

    Parameters
    ----------
    kind
        ``inprocess`` (the in-process grid), ``simulation`` (Flower's simulation engine)
        or ``deployment`` (SuperLink and SuperNodes, started with ``flwr run``).
    poll_interval
        Longest wait between two reply pulls, in seconds (pulls back off from 1 ms).
    timeout
        Seconds one exchange may take before the run stops.
    node_wait_timeout
        Seconds to wait for all SuperNodes to connect.
    cpus_per_node
        CPU share of each simulated node (Ray ``client_resources.num_cpus``).
    key_agreement
        The parties agree on their shared seed among themselves before setup (X25519
        over the server, which sees public keys and sealed seeds only;
        docs/deployment.md, "Agreed shared seeds"), instead of each reading
        ``node_config`` ``shared-seed``. For the GAN families; not with a resumed run.
    rejoin_grace
        Seconds a run waits for a lost party (its node unavailable, or silent past
        ``timeout``) to be restarted and connect again; all parties then resume from the
        last checkpoint and the run goes on, bit-identical to one never interrupted
        (VFLGAN and VFLGAN-base, which checkpoint). 0 stops at once; past the grace the
        run stops, and running the same command again resumes it.
    align_ids
        Before setup, the parties align their rows by ID through a private set
        intersection (X25519, the server as relay: docs/deployment.md, "Parties with
        different rows"), and train on the rows they all hold. For the VFLGAN family's
        party files (node_config ``data-path``).
    steps_per_exchange
        Training steps per exchange of the families that carry several
        (``train.steps_per_exchange`` of the VFLGAN family, ``gafm.steps_per_exchange``),
        where those are left ``null``. Each runtime's file in ``conf/runtime/`` sets the
        value measured for it (docs/evaluation.md, "Steps per exchange").
    """

    kind: RuntimeKind = "inprocess"
    poll_interval: float = DEFAULT_POLL_INTERVAL
    timeout: float = 600.0
    node_wait_timeout: float = 120.0
    cpus_per_node: float = 1.0
    torch_threads: int = 1
    """Intra-op threads of PyTorch; the models are small, and more threads than one per
    process only contend when parties share cores."""
    steps_per_exchange: int = 1
    key_agreement: bool = False
    rejoin_grace: float = 180.0
    align_ids: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.key_agreement, bool):
            raise ValueError(
                f"runtime.key_agreement must be true or false, got {self.key_agreement!r}"
            )
        if (
            not isinstance(self.steps_per_exchange, int)
            or isinstance(self.steps_per_exchange, bool)
            or self.steps_per_exchange < 1
        ):
            raise ValueError(
                f"runtime.steps_per_exchange must be a positive integer, got "
                f"{self.steps_per_exchange!r}"
            )
        if self.kind not in _RUNTIMES:
            raise ValueError(f"unknown runtime {self.kind!r}; valid: {list(_RUNTIMES)}")
        for name in ("poll_interval", "timeout", "node_wait_timeout", "cpus_per_node"):
            if not getattr(self, name) > 0:
                raise ValueError(f"runtime.{name} must be > 0, got {getattr(self, name)!r}")
        if isinstance(self.rejoin_grace, bool) or not self.rejoin_grace >= 0:
            raise ValueError(
                f"runtime.rejoin_grace must be >= 0 seconds (0: no rejoining), got "
                f"{self.rejoin_grace!r}"
            )


@dataclass(frozen=True)
class DatasetConfig:
    """The ``dataset`` group (see :class:`~flwr_vflgan.runtime.party_data.DataSpec`)."""

    source: str = "adult"
    # standard (paper 000), minmax (images), mode (CTGAN's mode-specific normalisation) or
    # quantile (each number through its column's empirical CDF to a standard normal).
    numeric_scaling: Literal["standard", "minmax", "mode", "quantile"] = "standard"
    data_dir: str | None = None
    # A named dataset's file, read with its loader (dataset=wine dataset.file=/path/x.csv).
    file: str | None = None
    # None, not {}: Hydra's struct mode forbids adding keys to an empty mapping, while
    # replacing a null with a whole one ('dataset.declared={zip: categorical}') works.
    declared: dict[str, str] | None = None
    label: str | None = None
    id_column: str | None = None
    # Columns left out of the table before anything is inferred ('dataset.drop=[Id,notes]').
    drop: list[str] | None = None
    # Public metadata the encoders are built from instead of the rows: a .json/.yaml file
    # or a bundled name ('adult'); dp=end_to_end uses the dataset's bundled one if unset.
    domain: str | None = None
    # A file of series in long format (algorithm=vflgan_ts): the time-step column
    # (id_column names the series; dataset=series_csv sets both).
    time_column: str | None = None
    # Train on a uniform sample of this many rows (seed 0; the same rows in every run):
    # paper 004's 10^5-row tables at a scale two cores allow ('dataset.rows=10000').
    rows: int | None = None


@dataclass(frozen=True)
class PartitionConfig:
    """The ``partition`` group: how many parties and which columns each holds.

    ``split`` is the division of ``strategy: importance`` (``1090``, ``5050`` or
    ``9010``, paper 001 Section 4.3.2); the other strategies ignore it. ``seed`` seeds
    the ``random`` split (default: the run seed) and the importance estimate (default
    0, so runs with different seeds share one split).
    """

    n_parties: int = 2
    strategy: Literal["even", "explicit", "random", "importance"] = "even"
    columns: list[list[str]] | None = None
    seed: int | None = None
    split: Literal["1090", "5050", "9010"] = "5050"

    def __post_init__(self) -> None:
        from flwr_vflgan.data.importance import parse_importance_split

        # partition.split=1090 reaches here as an int.
        object.__setattr__(
            self, "split", parse_importance_split(self.split, name="partition.split")
        )


@dataclass(frozen=True)
class OutputConfig:
    """What a run writes."""

    publish_rows: int | None = None
    """Rows of synthetic.csv (default: as many as the training table)."""
    checkpoint: bool = True
    """Write checkpoints every epoch and resume from them when the run directory has some."""
    evaluate: bool = True
    """Evaluate against the real table (the experimenter's view: the whole table must be
    readable where the server runs): the Frechet distance every epoch (model selection)
    and, at the end, the metric suite of the ``evaluation`` node with ``report.md`` and
    plots. Set false in a real deployment; the published generator is then the last one."""


@dataclass(frozen=True)
class ExportConfig:
    """The ``export`` group of ``python -m simulations.export_parties``.

    Parameters
    ----------
    out_dir
        Folder for the party files, schema sidecars and manifest (required there).
    format
        ``csv`` or ``parquet``.
    overwrite
        Replace a non-empty ``out_dir``.
    superlink
        ``host:port`` of the SuperLink's Fleet API, written into the printed
        ``flower-supernode`` commands.
    """

    out_dir: str | None = None
    format: Literal["csv", "parquet"] = "csv"
    overwrite: bool = False
    superlink: str = "127.0.0.1:8000"

    def __post_init__(self) -> None:
        if self.out_dir is not None and (not isinstance(self.out_dir, str) or not self.out_dir):
            raise ValueError(f"export.out_dir must be a non-empty path, got {self.out_dir!r}")
        if self.format not in ("csv", "parquet"):
            raise ValueError(f"unknown export.format {self.format!r}; valid: ['csv', 'parquet']")
        if not isinstance(self.overwrite, bool):
            raise ValueError(f"export.overwrite must be true or false, got {self.overwrite!r}")
        host, _, port = str(self.superlink).rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"export.superlink must be host:port, got {self.superlink!r}")


@dataclass(frozen=True)
class RunSpec:
    """A whole run, validated."""

    algorithm: VFLGANConfig
    data: DataSpec
    runtime: RuntimeConfig
    output: OutputConfig
    seed: int
    run_dir: Path
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)


def base_node() -> dict[str, Any]:
    """The full default tree, from the dataclasses (tuples become lists for OmegaConf)."""

    def plain(obj: Any) -> Any:
        data = asdict(obj)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    return {
        "seed": 0,
        "algorithm": {"variant": "vflgan"},
        "model": plain(ModelConfig()),
        # null: the runtime's steps per exchange (runtime.steps_per_exchange).
        "train": {**plain(TrainConfig()), "steps_per_exchange": None},
        "dp": DPConfig().to_dict(),
        "vtgan": VTGANSettings().to_dict(),
        "gafm": {**GAFMSettings().to_dict(), "steps_per_exchange": None},
        "marginals": MarginalSettings().to_dict(),
        "latent": plain(LatentSettings()),
        "gs_wgan": GSWGANSettings().to_dict(),
        "dplt": DPLTSettings().to_dict(),
        "series": {
            part: {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
            for part, values in SeriesSettings().to_dict().items()
        },
        # Missing here: each dataset/*.yaml names its table, and dataset=csv must be given
        # one (OmegaConf keeps an existing value when '???' is merged over it).
        "dataset": {**plain(DatasetConfig()), "source": "???"},
        "partition": plain(PartitionConfig()),
        "runtime": plain(RuntimeConfig()),
        "output": plain(OutputConfig()),
        "export": plain(ExportConfig()),
        "evaluation": EvaluationConfig().to_dict(),
    }


@dataclass(frozen=True)
class EvaluateSpec:
    """``python -m simulations.evaluate``: a real/synthetic pair and how to read it.

    Parameters
    ----------
    real
        A built-in dataset name (``adult``, ...) or a CSV/Parquet file.
    synthetic
        A CSV/Parquet file with the same columns.
    holdout
        Optional CSV/Parquet file of real rows the generator never saw.
    label
        Label column for the utility metrics (a built-in dataset's label by default).
    declared
        Column kinds for a file (``{zip: categorical}``); the rest are inferred.
    data_dir
        Where the non-bundled built-in datasets live.
    file
        The file of the built-in dataset ``real`` names, read with its loader.
    parties
        The vertical partition, one list of columns per party (Avg-/Across-client).
    n_parties
        Or: the number of parties of the even split the training used.
    title
        Heading of ``report.md``.
    id_column
        The real file's ID column, left out of every table (``dataset.id_column`` of the
        training run).
    drop
        Columns left out of every table that has them (``dataset.drop`` of the run).
    """

    real: str
    synthetic: str
    holdout: str | None = None
    label: str | None = None
    declared: dict[str, str] | None = None
    data_dir: str | None = None
    file: str | None = None
    parties: list[list[str]] | None = None
    n_parties: int | None = None
    title: str | None = None
    id_column: str | None = None
    drop: list[str] | None = None

    def __post_init__(self) -> None:
        for name in ("real", "synthetic"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name}= must name a dataset or a file, got {value!r}")
        if self.parties is not None and self.n_parties is not None:
            raise ValueError("give parties=[[...], ...] or n_parties=N, not both")
        if self.n_parties is not None and self.n_parties < 1:
            raise ValueError(f"n_parties must be >= 1, got {self.n_parties}")
        if self.id_column is not None and (
            not isinstance(self.id_column, str) or not self.id_column
        ):
            raise ValueError(f"id_column= must name a column, got {self.id_column!r}")
        if self.drop is not None and (
            isinstance(self.drop, str) or not all(isinstance(c, str) and c for c in self.drop)
        ):
            raise ValueError(
                f"drop= must be a list of column names ('drop=[a,b]'), got {self.drop!r}"
            )


def evaluate_node() -> dict[str, Any]:
    """The default tree of ``python -m simulations.evaluate``."""
    return {
        "real": "???",
        "synthetic": "???",
        "holdout": None,
        "label": None,
        "declared": None,
        "data_dir": None,
        "file": None,
        "parties": None,
        "n_parties": None,
        "title": None,
        "id_column": None,
        "drop": None,
        "evaluation": EvaluationConfig().to_dict(),
    }


def to_evaluate_spec(cfg: DictConfig) -> tuple[EvaluateSpec, EvaluationConfig]:
    """Validate ``python -m simulations.evaluate``'s composed config."""
    raw = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    assert isinstance(raw, dict)
    values = {str(k): v for k, v in raw.items() if k != "evaluation"}
    valid = {f.name for f in fields(EvaluateSpec)}
    unknown = sorted(set(values) - valid)
    if unknown:
        raise ValueError(f"unknown keys {unknown}; valid: {sorted(valid | {'evaluation'})}")
    return EvaluateSpec(**values), to_evaluation_config(cfg)


@dataclass(frozen=True)
class ReproduceConfig:
    """The ``reproduce`` node.

    Parameters
    ----------
    datasets, algorithms, seeds
        The grid of runs.
    epochs
        Training epochs per dataset (datasets not listed use ``train.epochs``).
    out_dir
        Where the runs and the tables go (relative to the working directory, so a
        second invocation reuses finished runs).
    jobs
        Runs trained at the same time, each in its own process.
    dp_epsilons
        Budgets of the DP rows (DP-VFLGAN's Gaussian mechanism, paper 000 Section
        5.3.2); empty for none.
    dp_delta
        Delta of the DP rows per dataset (paper 000: 1e-5 for Adult; see
        docs/privacy.md for German credit).
    dp_mechanism
        The GANs' mechanism in the DP rows: ``vflgan_gaussian`` (paper 000's), ``dpsgd``,
        ``end_to_end`` or ``pate`` (VDGAN-PATE, paper 004). AIM, MST and DPLT always run
        their own end-to-end mechanism.
    non_dp
        Also train the rows without DP.
    n_parties
        Client counts of paper 001's rows (``ctgan``, ``vtgan``): one VT-GAN row per
        count (the even split, or whatever ``partition.strategy`` says, into that many
        clients). The centralized ``ctgan`` baseline is trained once per seed (its own
        run keeps ``partition.n_parties``) and listed under every count with its
        Avg-/Across-client association differences measured on that count's split.
        Paper 000's algorithms ignore it and keep ``partition.n_parties``.
    gafm_parties
        Non-label party counts of paper 002's rows (``gafm``, ``marvell``, ``maxnorm``,
        ``splitnn``): 1 is Table 2's two-party setting, 3 Table C.1's. Each row is one run
        of ``gafm.repetitions`` seeds starting at the first of ``seeds``.
    gafm_ablations
        With ``gafm`` among the algorithms, also its GAN-only and CE-only runs (paper 002,
        Section 4.2.2) for each party count, their rows in the table, and Figure 3 (test
        AUC against leak AUC) in ``paper002_figure3.png``.
    vtgan_epochs
        Training epochs of paper 001's rows per dataset (datasets not listed use
        ``train.epochs``: 100 from ``conf/algorithm/vtgan.yaml`` and ``ctgan.yaml``).
        Paper 001 trains 300; 100 is the algorithm files' length. On Adult on two CPU
        cores, beside other jobs, CTGAN took 11-17 minutes and VT-GAN with 3 clients
        30-62 at 100 epochs; VT-GAN with 2 clients was not timed at that length. At 30
        epochs the whole grid took about 30 minutes.
    """

    datasets: tuple[str, ...] = ("adult", "german_credit")
    algorithms: tuple[str, ...] = ("wgan_gp", "vertigan", "vflgan_base", "vflgan")
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: dict[str, int] = field(default_factory=lambda: {"adult": 30, "german_credit": 300})
    out_dir: str = "runs/reproduce"
    jobs: int = 1
    dp_epsilons: tuple[float, ...] = ()
    dp_delta: dict[str, float] = field(
        # Paper 000, Section 5.3.2, for the wine and HCV tables. Paper 004 states no delta:
        # its Adult gets Adult's 1e-5, below 1/n for its 10^5 rows.
        default_factory=lambda: {
            "adult": 1e-5,
            "adult_thesis": 1e-5,
            "german_credit": 1e-4,
            "wine_red": 5e-4,
            "wine_white": 2e-4,
            "hcv": 8e-4,
        }
    )
    dp_mechanism: str = "vflgan_gaussian"
    non_dp: bool = True
    n_parties: tuple[int, ...] = (2,)
    vtgan_epochs: dict[str, int] = field(default_factory=lambda: {"adult": 100})
    gafm_parties: tuple[int, ...] = (1, 3)
    gafm_ablations: bool = False

    @property
    def variants(self) -> list[float | None]:
        """The privacy of each row: ``None`` (no DP, if ``non_dp``), then each budget."""
        return ([None] if self.non_dp else []) + list(self.dp_epsilons)

    def _check_dp(self) -> None:
        object.__setattr__(self, "dp_epsilons", tuple(float(e) for e in self.dp_epsilons))
        if any(not e > 0 for e in self.dp_epsilons):
            raise ValueError(f"reproduce.dp_epsilons must be > 0, got {list(self.dp_epsilons)}")
        mechanisms = ("vflgan_gaussian", "dpsgd", "end_to_end", "pate")
        if self.dp_mechanism not in mechanisms:
            raise ValueError(
                f"reproduce.dp_mechanism must be one of {list(mechanisms)}, got {self.dp_mechanism!r}"
            )
        if not self.non_dp and not self.dp_epsilons:
            raise ValueError("reproduce.non_dp=false needs reproduce.dp_epsilons: no runs left")

    def __post_init__(self) -> None:
        self._check_dp()
        for name in ("datasets", "algorithms", "seeds"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
            if not getattr(self, name):
                raise ValueError(f"reproduce.{name} must not be empty")
        valid = [v.value for v in Variant]
        unknown = [a for a in self.algorithms if a not in valid]
        if unknown:
            raise ValueError(f"unknown reproduce.algorithms {unknown}; valid: {valid}")
        if self.jobs < 1:
            raise ValueError(f"reproduce.jobs must be >= 1, got {self.jobs}")
        for field_name in ("epochs", "vtgan_epochs"):
            for name, epochs in getattr(self, field_name).items():
                if int(epochs) < 1:
                    raise ValueError(f"reproduce.{field_name}.{name} must be >= 1, got {epochs}")
        object.__setattr__(self, "n_parties", tuple(self.n_parties))
        if (
            not self.n_parties
            or any(not _is_count(n) or n < 2 for n in self.n_parties)
            or len(set(self.n_parties)) != len(self.n_parties)
        ):
            raise ValueError(
                "reproduce.n_parties must be distinct client counts >= 2, "
                f"got {list(self.n_parties)}"
            )
        object.__setattr__(self, "gafm_parties", tuple(self.gafm_parties))
        if (
            not self.gafm_parties
            or any(not _is_count(n) or n < 1 for n in self.gafm_parties)
            or len(set(self.gafm_parties)) != len(self.gafm_parties)
        ):
            raise ValueError(
                "reproduce.gafm_parties must be distinct non-label party counts >= 1, "
                f"got {list(self.gafm_parties)}"
            )
        vertical = [
            a
            for a in self.algorithms
            if a
            in (
                Variant.VTGAN.value,
                Variant.CTGAN.value,
                Variant.GAFM.value,
                Variant.SPLITNN.value,
                Variant.MAXNORM.value,
                Variant.MARVELL.value,
            )
        ]
        if vertical and not self.non_dp:
            raise ValueError(
                f"reproduce.algorithms {vertical} have no DP rows (papers 001 and 002 train "
                "without DP): set reproduce.non_dp=true or leave them out"
            )


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def reproduce_node() -> dict[str, Any]:
    """Defaults of the ``reproduce`` node, from :class:`ReproduceConfig`."""
    cfg = asdict(ReproduceConfig())
    return {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}


def register_configs() -> None:
    """Register the ``base`` and ``evaluate_base`` nodes with Hydra's ConfigStore (idempotent)."""
    ConfigStore.instance().store(name="base", node=base_node())
    ConfigStore.instance().store(name="evaluate_base", node=evaluate_node())
    ConfigStore.instance().store(name="reproduce_base", node={"reproduce": reproduce_node()})


def _section(cfg: DictConfig, name: str, cls: type) -> dict[str, Any]:
    raw = OmegaConf.to_container(cfg[name], resolve=True) if name in cfg else {}
    assert isinstance(raw, dict)
    values: dict[str, Any] = {str(k): v for k, v in raw.items()}
    valid = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - valid)
    if unknown:
        raise ValueError(f"unknown keys {unknown} in '{name}'; valid: {sorted(valid)}")
    return values


def to_run_spec(cfg: DictConfig, run_dir: str | Path) -> RunSpec:
    """Validate a composed config and convert it to dataclasses."""
    seed = cfg.seed
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if OmegaConf.is_missing(cfg.dataset, "source"):
        raise ValueError(
            "dataset=csv needs the table: add dataset.source=/path/to/table.csv (a CSV or "
            "Parquet file)"
        )
    runtime = RuntimeConfig(**_section(cfg, "runtime", RuntimeConfig))
    algorithm = _algorithm(cfg, runtime)
    variant = algorithm.variant
    if algorithm.is_gafm and algorithm.dp.enabled:
        raise ValueError(
            f"algorithm={variant.value} has no differential privacy (paper 002 measures label "
            "leakage with leak AUC instead): remove the dp override"
        )
    central = variant in (Variant.WGAN_GP, Variant.GS_WGAN, Variant.CTGAN) or algorithm.is_marginal
    if runtime.align_ids and central:
        raise ValueError(
            f"runtime.align_ids aligns the parties' rows in a federated run; "
            f"algorithm={variant.value} trains on one table in one process: remove it"
        )
    scaling = cfg.dataset.get("numeric_scaling", "standard")
    if scaling in FITTED_ONLY and variant not in (
        *FEDERATED_GANS,
        Variant.WGAN_GP,
        Variant.GS_WGAN,
    ):
        raise ValueError(
            f"dataset.numeric_scaling={scaling} is the VFLGAN family's option (vflgan, vflgan_base, "
            f"vertigan, wgan_gp, gs_wgan); algorithm={variant.value} encodes its own columns: remove it"
        )
    # One party holding every column is latent diffusion's centralized reference.
    least = 1 if algorithm.is_gafm or algorithm.is_latent else 2
    if int(cfg.partition.n_parties) < least:
        raise ValueError(
            f"algorithm={variant.value} splits the columns among parties: partition.n_parties "
            f"must be >= {least}, got {cfg.partition.n_parties}"
        )
    _check_series(algorithm, str(cfg.dataset.source), cfg.dataset.get("time_column"))
    output = OutputConfig(**_section(cfg, "output", OutputConfig))
    data = _data_spec(cfg, algorithm, seed)
    evaluation = to_evaluation_config(cfg)
    return RunSpec(algorithm, data, runtime, output, seed, Path(run_dir), evaluation)


def _check_series(algorithm: VFLGANConfig, source: str, time_column: str | None) -> None:
    """A series dataset trains with VFLGAN-TS, and VFLGAN-TS only on series."""
    series = is_series_source(source) or time_column is not None
    if algorithm.is_series and not series:
        raise ValueError(
            f"algorithm=vflgan_ts trains on multivariate series; dataset {source!r} is a table: "
            f"choose a series dataset ({', '.join(sorted(SERIES_DATASETS))}), e.g. dataset=sine6, "
            "or a long-format file with dataset=series_csv dataset.source=FILE"
        )
    if series and not algorithm.is_series:
        raise ValueError(
            f"dataset {source!r} holds time series, which only algorithm=vflgan_ts trains; "
            f"add algorithm=vflgan_ts (got algorithm={algorithm.variant.value})"
        )


def _algorithm(cfg: DictConfig, runtime: RuntimeConfig) -> VFLGANConfig:
    """The umbrella of the algorithm's settings, the runtime's steps per exchange filled
    in where they are left null."""
    variant = parse_variant(_section(cfg, "algorithm", _Algorithm)["variant"])
    train, gafm = _section(cfg, "train", TrainConfig), _section(cfg, "gafm", GAFMSettings)
    # Left null, the steps per exchange are the runtime's for the families that carry
    # several: the federated VFLGAN family and VT-GAN (train.*) and split classification
    # (gafm.*). The centralized baselines exchange nothing.
    federated_gan = variant in (*FEDERATED_GANS, Variant.VTGAN, Variant.VFLGAN_TS)
    if train.get("steps_per_exchange") is None:
        train["steps_per_exchange"] = runtime.steps_per_exchange if federated_gan else 1
    if gafm.get("steps_per_exchange") is None:
        gafm["steps_per_exchange"] = runtime.steps_per_exchange
    return VFLGANConfig(
        variant=variant,
        model=ModelConfig(**_section(cfg, "model", ModelConfig)),
        train=TrainConfig(**train),
        dp=DPConfig(**_section(cfg, "dp", DPConfig)),
        vtgan=VTGANSettings(**_section(cfg, "vtgan", VTGANSettings)),
        gafm=GAFMSettings(**gafm),
        marginals=MarginalSettings(**_section(cfg, "marginals", MarginalSettings)),
        series=SeriesSettings.from_dict(_series_section(cfg)),
        latent=LatentSettings.from_dict(_section(cfg, "latent", LatentSettings)),
        gs_wgan=GSWGANSettings.from_dict(_section(cfg, "gs_wgan", GSWGANSettings)),
        dplt=DPLTSettings.from_dict(_section(cfg, "dplt", DPLTSettings)),
    )


def _series_section(cfg: DictConfig) -> dict[str, Any]:
    raw = OmegaConf.to_container(cfg["series"], resolve=True) if "series" in cfg else {}
    assert isinstance(raw, dict)
    return {str(k): v for k, v in raw.items()}


def _data_spec(cfg: DictConfig, algorithm: VFLGANConfig, seed: int) -> DataSpec:
    """The table and its split among the parties."""
    dataset = DatasetConfig(**_section(cfg, "dataset", DatasetConfig))
    partition = PartitionConfig(**_section(cfg, "partition", PartitionConfig))
    domain = _public_domain(dataset, algorithm)
    if partition.seed is not None:
        partition_seed = partition.seed
    else:
        # An importance split is a property of the table, so it does not follow the run
        # seed: runs with different seeds share one split unless partition.seed is set.
        partition_seed = 0 if partition.strategy == "importance" else seed
    return DataSpec(
        source=dataset.source,
        n_parties=partition.n_parties,
        partition=partition.strategy,
        columns=tuple(tuple(c) for c in partition.columns) if partition.columns else None,
        partition_seed=partition_seed,
        numeric_scaling=dataset.numeric_scaling,
        data_dir=dataset.data_dir,
        file=dataset.file,
        declared=dataset.declared or {},
        label=dataset.label,
        id_column=dataset.id_column,
        importance_split=partition.split if partition.strategy == "importance" else None,
        drop=tuple(dataset.drop or ()),
        domain=domain.to_mapping() if domain is not None else None,
        time_column=dataset.time_column,
        rows=dataset.rows,
    )


def _public_domain(dataset: DatasetConfig, algorithm: VFLGANConfig) -> PublicDomain | None:
    """``dataset.domain`` resolved; under ``dp=end_to_end`` the dataset's bundled domain
    when none is given, and an error when there is none to use."""
    domain = resolve_domain(dataset.domain)
    if algorithm.dp.mechanism is not Mechanism.END_TO_END:
        return domain
    if not (algorithm.is_vflgan_family or algorithm.is_marginal or algorithm.is_dplt):
        raise ValueError(
            f"dp=end_to_end is for vflgan, vflgan_base, wgan_gp, aim, mst and dplt; algorithm="
            f"{algorithm.variant.value} fits its encoders' modes on the rows (use dp=dpsgd)"
        )
    return required_domain(domain, dataset.source)


def to_evaluation_config(cfg: DictConfig) -> EvaluationConfig:
    """The ``evaluation`` node as an :class:`EvaluationConfig`.

    Its ``seed`` is the evaluation's own (default 0), not the run's: runs with different
    training seeds are then measured with the same splits, forests and subsamples, so
    their spread is the generators' alone.
    """
    return EvaluationConfig(**_section(cfg, "evaluation", EvaluationConfig))


@dataclass(frozen=True)
class _Algorithm:
    variant: str = "vflgan"


def compose_run_config(overrides: str) -> DictConfig:
    """The composed Hydra config of ``simulations.run`` for a space-separated override
    string (the ``flwr run`` ServerApp's ``overrides``). Callable from inside another
    Hydra app (the benchmark deploying a run): that app's Hydra is set aside and restored."""
    import shlex

    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    running = GlobalHydra.instance().hydra if GlobalHydra.instance().is_initialized() else None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_module("flwr_vflgan.conf", version_base=None):
            return compose("config", overrides=shlex.split(overrides))
    finally:
        if running is not None:  # leaving the block swapped in a new GlobalHydra instance
            GlobalHydra.instance().clear()
            GlobalHydra.instance().initialize(running)
