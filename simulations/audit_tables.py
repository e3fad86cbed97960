"""Paper 000's privacy-audit tables in one command: Table 2 (ASSD), Table 3 (the baseline
attacks beside ASSD on Housing) and Table 4 (ASIF), next to the paper's numbers.

    python -m simulations.audit_tables                                  # all three
    python -m simulations.audit_tables tables.tables=[3] tables.out_dir=runs/table3
    python -m simulations.audit_tables audit.shadows=100 audit.executor=ray train.epochs=300

Every cell is one ``python -m simulations.audit`` audit in its own directory under
``tables.out_dir`` (a rerun reuses every finished shadow and run): Tables 2 and 4 audit
VFLGAN on ``tables.adult_rows`` rows of Adult without DP and with DP-VFLGAN's Gaussian
mechanism at each of ``tables.epsilons`` (delta 1e-5), for Record 1 (``distance``) and
Record 2 (``outliers``), ASIF reading the same shadows as ASSD; Table 3 trains on
``tables.housing_rows`` rows of California housing and sets the six baseline attacks
beside ASSD on Record 2. ``tables.md`` and ``tables.json`` hold the result.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import hydra
from hydra import compose
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.simulations.audit_config import AuditConfig, audit_config
from flwr_vflgan.simulations.baseline_audit import NAMES, PAPER_HOUSING, run_baselines
from flwr_vflgan.simulations.cli import run_hydra_main
from flwr_vflgan.simulations.config import RunSpec, to_run_spec
from flwr_vflgan.simulations.outputs import write_json
from flwr_vflgan.simulations.shadow_audit import PAPER_TABLE_2, PAPER_TABLE_4, run_shadow_audit

RECORDS = ("distance", "outliers")
"""Record 1 and Record 2 of Tables 2 and 4 (Appendix A.7)."""


@dataclass(frozen=True)
class TablesConfig:
    """The ``tables`` node: which tables, and the grid behind them."""

    tables: tuple[int, ...] = (2, 3, 4)
    out_dir: str = "runs/audit-tables"
    epsilons: tuple[float, ...] = (10.0, 5.0)
    adult_rows: int = 500
    housing_rows: tuple[int, ...] = (100, 200)
    housing_epochs: int = 300
    housing_batch_size: int = 16

    def __post_init__(self) -> None:
        for name in ("tables", "epsilons", "housing_rows"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.tables or not set(self.tables) <= {2, 3, 4}:
            raise ValueError(f"tables.tables must list some of [2, 3, 4], got {list(self.tables)}")
        if any(not e > 0 for e in self.epsilons):
            raise ValueError(f"tables.epsilons must be positive, got {list(self.epsilons)}")


ConfigStore.instance().store(
    name="tables_base",
    node={
        "tables": {
            k: list(v) if isinstance(v, tuple) else v for k, v in asdict(TablesConfig()).items()
        }
    },
)


def _cell(
    overrides: list[str], extra: list[str], out: Path, audit: AuditConfig, **changes: Any
) -> tuple[RunSpec, AuditConfig]:
    """The spec and audit settings of one cell: the command line, then the cell's groups."""
    cfg = compose("audit_tables", overrides=[*overrides, *extra])
    spec = to_run_spec(
        OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k not in ("audit", "tables")]), out
    )
    return spec, replace(audit_config(cfg), **changes)


def adult_rows(tc: TablesConfig, overrides: list[str], audit: AuditConfig) -> dict[str, Any]:
    """Tables 2 and 4: per DP setting and record, ASSD and then ASIF on its shadows."""
    results: dict[str, Any] = {}
    settings: list[tuple[str, list[str]]] = [("none", [])] + [
        (f"{e:g}", ["dp=vflgan_gaussian", f"dp.target_epsilon={e}", "dp.delta=1e-5"])
        for e in tc.epsilons
    ]
    for label, extra in settings:
        for record in RECORDS:
            out = Path(tc.out_dir) / "adult" / f"dp-{label}" / record
            for scheme in [s for s, t in (("assd", 2), ("asif", 4)) if t in tc.tables]:
                spec, cell = _cell(
                    overrides, ["dataset=adult", *extra], out, audit,
                    scheme=scheme, target=record, train_rows=tc.adult_rows,
                )  # fmt: skip
                summary = run_shadow_audit(spec, cell, out, _report)
                results.setdefault(scheme, {}).setdefault(label, {})[record] = summary["attacks"]
    return results


def housing_rows(tc: TablesConfig, overrides: list[str], audit: AuditConfig) -> dict[str, Any]:
    """Table 3: per training size, the six attacks and ASSD on Record 2."""
    results: dict[str, Any] = {}
    extra = [
        "dataset=california_housing",
        f"train.epochs={tc.housing_epochs}",
        f"train.batch_size={tc.housing_batch_size}",
    ]
    for rows in tc.housing_rows:
        out = Path(tc.out_dir) / "housing" / str(rows)
        spec, cell = _cell(
            overrides, extra, out / "baselines", audit, scheme="baselines", train_rows=rows
        )
        attacks = run_baselines(spec, cell, out / "baselines", _report)["attacks"]
        spec, cell = _cell(
            overrides, extra, out / "assd", audit, scheme="assd", target="outliers", train_rows=rows
        )
        assd = run_shadow_audit(spec, cell, out / "assd", _report)["attacks"]
        results[str(rows)] = {"attacks": attacks, "assd": assd}
    return results


def _report(line: str) -> None:
    print(line, flush=True)


def _cells(attacks: dict[str, Any], party: str = "") -> list[str]:
    return [
        f"{attacks[f'{party}{kind}']['accuracy_mean']:.2f} "
        f"({attacks[f'{party}{kind}']['accuracy_std']:.2f})"
        for kind in ("naive", "correlation")
    ]


def render(adult: dict[str, Any], housing: dict[str, Any], audit: AuditConfig) -> str:
    """The tables in the paper's layout, each row beside the paper's."""
    lines = [f"# Paper 000's privacy audits ({audit.shadows} shadows per world)", ""]
    header = "| | Record 1 naive | Record 1 corr | Record 2 naive | Record 2 corr |"
    for scheme, number, paper in (("assd", 2, PAPER_TABLE_2), ("asif", 4, PAPER_TABLE_4)):
        if scheme not in adult:
            continue
        lines += [f"## Table {number} ({scheme.upper()}, Adult, accuracy (std))", "", header]
        lines.append("|---|---|---|---|---|")
        for label, records in adult[scheme].items():
            parties = ["party 0 ", "party 1 "] if scheme == "asif" else [""]
            for party in parties:
                cells = [c for r in RECORDS for c in _cells(records[r], party)]
                name = "no DP" if label == "none" else f"DP, epsilon {label}"
                lines.append(f"| {name} {party}| " + " | ".join(cells) + " |")
            if label in paper:
                lines.append("| paper 000 | " + " | ".join(paper[label]) + " |")
        lines.append("")
    if housing:
        head = " | ".join(NAMES.values())
        lines += [
            "## Table 3 (Housing, AUC)",
            "",
            f"| N1 / N2 | {head} | ASSD |",
            "|---|" + "---|" * 7,
        ]
        for rows, found in housing.items():
            aucs = [f"{found['attacks'][a]['auc']:.2f}" for a in NAMES]
            assd = max(r["auc_mean"] for r in found["assd"].values())
            lines.append(
                f"| {rows} / {audit.reference_rows} | " + " | ".join(aucs) + f" | {assd:.2f} |"
            )
            paper = PAPER_HOUSING.get(int(rows))
            if paper is not None:
                lines.append("| paper 000 | " + " | ".join(f"{v:.2f}" for v in paper) + " |")
        lines += ["", "ASSD: the better of the naive and correlation adversaries' mean AUC."]
    return "\n".join([*lines, ""])


@hydra.main(config_path="pkg://flwr_vflgan.conf", config_name="audit_tables", version_base=None)
def main(cfg: DictConfig) -> None:
    """Hydra entry point: run every cell (reusing what finished), write the tables."""
    raw = OmegaConf.to_container(cfg.tables, resolve=True)
    assert isinstance(raw, dict)
    tc = TablesConfig(**{str(k): v for k, v in raw.items()})
    audit = audit_config(cfg)
    overrides = list(HydraConfig.get().overrides.task)
    adult = adult_rows(tc, overrides, audit) if {2, 4} & set(tc.tables) else {}
    housing = housing_rows(tc, overrides, audit) if 3 in tc.tables else {}
    text = render(adult, housing, audit)
    out = Path(tc.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / "tables.md", lambda p: p.write_text(text))
    write_json(out / "tables.json", {"adult": adult, "housing": housing})
    print(text, flush=True)
    print(f"wrote {out / 'tables.md'} and tables.json", flush=True)


if __name__ == "__main__":
    sys.exit(run_hydra_main("simulations.audit_tables", main))
