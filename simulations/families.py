"""The algorithm families, registered once: every entry point looks a family up here.

A family is the algorithms that share one protocol (one strategy, one party client, one
kind of output): the VFLGAN family (VFLGAN, VFLGAN-base, the centralized WGAN-GP and
VertiGAN, whose summed backbone gradients ride the same forward/apply step), VDGAN (a
generator on the server, critics at the clients; its rows join paper 000's table),
VFLGAN-TS (series: VFLGAN's strategy and party client with its own models), VT-GAN
(with its centralized CTGAN baseline), split classification (GAFM and its baselines) and
the centralized DP marginal baselines (AIM, MST).
Its entry names, as ``"package.module:attribute"`` strings imported on first use, what it
plugs into each command:

* ``run``: train, publish, evaluate and write a run directory (``simulations.run``, the
  ``flwr run`` ServerApp, ``simulations.reproduce``);
* ``bench``: its benchmark (``python -m simulations.bench algorithm=<name>``);
* ``reproduce``: its module of the reproduction harness (:class:`Reproduction`).

Party export asks the algorithm's settings (``is_gafm``: the server holds the labels)
rather than this registry, since the deployment harness that a benchmark starts uses it.

The party side registers its client in :data:`flwr_vflgan.clients.client_app.CLIENT_FAMILIES`.
Adding a family: docs/architecture.md, "Adding an algorithm family".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from flwr.serverapp import Grid
from omegaconf import DictConfig

from flwr_vflgan.config import Variant, parse_variant
from flwr_vflgan.plugin import load_attribute

from .config import ReproduceConfig, RunSpec

Progress = Callable[[dict[str, Any]], None]
Rows = list[tuple[RunSpec, dict[str, Any]]]


class RunFn(Protocol):
    """A family's ``run``: train, publish, evaluate and write ``spec.run_dir``'s outputs;
    returns what ``metrics.json`` holds. The caller holds the run directory."""

    def __call__(
        self,
        spec: RunSpec,
        *,
        grid: Grid | None = ...,
        progress: Progress | None = ...,
        observer: Callable | None = ...,
    ) -> dict[str, Any]: ...


class Reproduction(Protocol):
    """What a family's reproduction module provides (``simulations.reproduce``)."""

    TABLE: str
    """The stem of the table files it writes into ``reproduce.out_dir``."""

    def specs(
        self,
        base: DictConfig,
        rc: ReproduceConfig,
        dataset: str,
        algorithm: str,
        epsilon: float | None,
    ) -> list[RunSpec]:
        """The runs of ``algorithm`` on ``dataset`` (``epsilon``: a DP row, ``None`` without)."""
        ...

    def run_one(self, spec: RunSpec) -> dict[str, Any]:
        """Train (or reuse a finished run of the same configuration) and return its metrics."""
        ...

    # Optional: ``rows(spec, metrics, rc) -> Rows``, the table rows one run makes
    # (without it, one: the run itself; see :func:`table_rows`).

    def write(self, rows: Rows, rc: ReproduceConfig) -> tuple[str, dict[str, Any]]:
        """The table's markdown and its JSON form."""
        ...

    def announce(self, spec: RunSpec, metrics: dict[str, Any]) -> str:
        """One line printed as a run finishes."""
        ...


@dataclass(frozen=True)
class Family:
    """One algorithm family's entries (see the module docstring)."""

    name: str
    variants: tuple[Variant, ...]
    run: str
    bench: str
    reproduce: str

    def runner(self) -> RunFn:
        """The family's ``run`` function."""
        found: RunFn = load_attribute(self.run)
        return found

    def benchmark(self) -> Callable[[DictConfig], dict[str, Any]]:
        """The family's benchmark: prints its lines, returns the JSON record."""
        found: Callable[[DictConfig], dict[str, Any]] = load_attribute(self.bench)
        return found

    def reproduction(self) -> Reproduction:
        """The family's reproduction module."""
        found: Reproduction = importlib.import_module(self.reproduce)
        return found


FAMILIES: tuple[Family, ...] = (
    Family(
        "vflgan",
        (Variant.VFLGAN, Variant.VFLGAN_BASE, Variant.WGAN_GP, Variant.GS_WGAN, Variant.VERTIGAN),
        run="flwr_vflgan.simulations.pipeline:run_gan",
        bench="flwr_vflgan.simulations.bench_vflgan:measure",
        reproduce="flwr_vflgan.simulations.reproduce_vflgan",
    ),
    Family(
        "vtgan",
        (Variant.VTGAN, Variant.CTGAN),
        run="flwr_vflgan.simulations.pipeline:run_gan",
        bench="flwr_vflgan.simulations.bench_vtgan:measure_cfg",
        reproduce="flwr_vflgan.simulations.reproduce_vtgan",
    ),
    Family(
        "vdgan",
        (Variant.VDGAN,),
        run="flwr_vflgan.simulations.pipeline:run_gan",
        bench="flwr_vflgan.simulations.bench_vflgan:measure",
        reproduce="flwr_vflgan.simulations.reproduce_vflgan",
    ),
    Family(
        "latent",
        (Variant.LATENT_DIFFUSION,),
        run="flwr_vflgan.simulations.pipeline:run_gan",
        bench="flwr_vflgan.simulations.bench_latent:measure",
        reproduce="flwr_vflgan.simulations.reproduce_vflgan",
    ),
    Family(
        "series",
        (Variant.VFLGAN_TS,),
        run="flwr_vflgan.simulations.series_pipeline:run_series",
        bench="flwr_vflgan.simulations.bench_series:measure",
        reproduce="flwr_vflgan.simulations.reproduce_series",
    ),
    Family(
        "gafm",
        (Variant.GAFM, Variant.SPLITNN, Variant.MAXNORM, Variant.MARVELL),
        run="flwr_vflgan.simulations.gafm_pipeline:run_gafm",
        bench="flwr_vflgan.simulations.bench_gafm:measure",
        reproduce="flwr_vflgan.simulations.reproduce_gafm",
    ),
    Family(
        "dplt",
        (Variant.DPLT,),
        run="flwr_vflgan.simulations.pipeline:run_gan",
        bench="flwr_vflgan.simulations.bench_dplt:measure",
        # Its rows join paper 000's Table 1 beside the DP GANs, as in the paper.
        reproduce="flwr_vflgan.simulations.reproduce_vflgan",
    ),
    Family(
        "marginals",
        (Variant.AIM, Variant.MST),
        run="flwr_vflgan.simulations.pipeline:run_gan",
        bench="flwr_vflgan.simulations.bench_marginals:measure",
        # Their DP rows join paper 000's Table 1 beside the DP GANs.
        reproduce="flwr_vflgan.simulations.reproduce_vflgan",
    ),
)
"""Every family of the project, in the order reproduction tables are written."""


def family_of(variant: str | Variant) -> Family:
    """The family that ``variant`` (an ``algorithm=`` name) belongs to.

    Raises
    ------
    ValueError
        No family has the variant; the message lists the valid names.
    """
    variant = parse_variant(variant)
    for family in FAMILIES:
        if variant in family.variants:
            return family
    valid = [v.value for f in FAMILIES for v in f.variants]
    raise ValueError(f"algorithm {variant.value!r} belongs to no family; valid: {valid}")


def table_rows(
    reproduction: Reproduction, spec: RunSpec, metrics: dict[str, Any], rc: ReproduceConfig
) -> Rows:
    """The rows one run makes in its family's table: the family's ``rows`` hook, or the
    run itself."""
    rows = getattr(reproduction, "rows", None)
    return [(spec, metrics)] if rows is None else list(rows(spec, metrics, rc))


def families_of(variants: Sequence[str | Variant]) -> list[Family]:
    """The families of ``variants``, each once, in :data:`FAMILIES` order."""
    wanted = {family_of(v).name for v in variants}
    return [f for f in FAMILIES if f.name in wanted]


def run_experiment(
    spec: RunSpec,
    *,
    grid: Grid | None = None,
    progress: Progress | None = None,
    observer: Callable | None = None,
) -> dict[str, Any]:
    """Train, publish and evaluate with the ``run`` of ``spec``'s family; returns the
    metrics written to ``metrics.json``.

    ``grid`` is the Grid of a running Flower ServerApp (``flwr run``); without it the
    runtime named by the spec is started here. ``observer`` sees every message of an
    in-process run.

    Raises
    ------
    RunDirectoryBusy
        Another run holds the directory.
    """
    run = family_of(spec.algorithm.variant).runner()
    return run(spec, grid=grid, progress=progress, observer=observer)
