"""Paper 002's Appendix D helpers: choose ``Delta`` on 10% subsets and balance ``gamma``.

    python -m simulations.gafm_tune                                  # Spambase
    python -m simulations.gafm_tune tune.repeats=2 gafm.epochs=100 tune.gamma=false

Trains GAFM on a random 10% subset (``tune.fraction``) for each ``Delta`` of
``tune.deltas``, ``tune.repeats`` times, and prints the average ``leak AUC / train AUC``
ratio over the norm, mean and median attacks (Table D.6) and the ``Delta`` with the
smallest; then (``tune.gamma``) trains once with ``gamma = 1`` on all rows and prints the
average GAN and CE gradients at the cut layer (Table D.3) and the ``gamma`` that
balances them. With ``tune.full_data=true`` it also computes each ``Delta``'s ratio on
the whole table (Table D.6's full-data row) and says whether the subsets' choice is among
the three smallest (Figure D.1). Writes ``tuning.json`` and ``delta.png`` (Figure D.1)
into the Hydra run directory. The parties are
simulated in this process (the helper needs every party's columns).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

import hydra
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from flwr_vflgan.atomic import write_atomically
from flwr_vflgan.gafm.config import GAFMSettings
from flwr_vflgan.gafm.data import all_features, block_fields, spec_labels
from flwr_vflgan.gafm.plots import plot_delta_ratios
from flwr_vflgan.gafm.training import binary_labels
from flwr_vflgan.gafm.tuning import DeltaSelection, balance_gamma, select_delta, smallest
from flwr_vflgan.simulations.cli import run_hydra_main
from flwr_vflgan.simulations.config import register_configs, to_run_spec

register_configs()

TUNE_KEYS = ("deltas", "fraction", "repeats", "gamma", "full_data")
"""The ``tune`` node's keys (conf/gafm_tune.yaml)."""


@hydra.main(config_path="pkg://flwr_vflgan.conf", config_name="gafm_tune", version_base=None)
def main(cfg: DictConfig) -> None:
    """Hydra entry point."""
    raw_tune = OmegaConf.to_container(cfg.tune, resolve=True)
    assert isinstance(raw_tune, dict)
    tune: dict[str, Any] = {str(k): v for k, v in raw_tune.items()}
    unknown = sorted(set(tune) - set(TUNE_KEYS))
    if unknown:
        raise ValueError(f"unknown tune keys {unknown}; valid: {sorted(TUNE_KEYS)}")
    run_dir = HydraConfig.get().runtime.output_dir
    spec = to_run_spec(OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "tune"]), run_dir)
    if not spec.algorithm.is_gafm:
        raise ValueError(f"gafm_tune tunes GAFM, got algorithm={spec.algorithm.variant.value}")
    torch.set_num_threads(spec.runtime.torch_threads)
    settings = spec.algorithm.gafm
    blocks = all_features(spec.data)
    features, fields = [b.encoded for b in blocks], [block_fields(b) for b in blocks]
    raw, _, _ = spec_labels(spec.data)
    labels, _ = binary_labels(np.asarray(raw), settings.positive_label)
    out: dict = {"dataset": spec.data.source, "n_parties": spec.data.n_parties, "tune": tune}
    fraction = float(tune["fraction"])
    selection = _delta_ratios(features, fields, labels, settings, tune, fraction, spec.seed)
    out["delta"] = _selection_record(selection)
    full = None
    if tune.get("full_data"):
        full = _delta_ratios(features, fields, labels, settings, tune, 1.0, spec.seed)
        out["delta_full"] = _selection_record(full)
        best_three = smallest(full.ratios)
        out["delta_full"]["smallest_three"] = best_three
        out["delta_full"]["chosen_among_them"] = selection.best in best_three
        print(
            f"the subsets' Delta {selection.best:g} is {'' if selection.best in best_three else 'not '}"
            f"among the three smallest whole-table ratios {best_three}"
        )
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    plot_delta_ratios(
        selection.ratios,
        full.ratios if full else None,
        selection.best,
        spec.run_dir / "delta.png",
        f"Delta on {spec.data.source}: {tune['fraction']:g} subsets"
        + (" and the whole table" if full else ""),
    )
    if tune["gamma"]:
        balance = balance_gamma(features, labels, settings, seed=spec.seed, fields=fields)
        print(
            f"gamma: average normalised GAN gradient {balance.gan_gradient:.4g}, CE gradient "
            f"{balance.ce_gradient:.4g} at gamma = 1 (raw: {balance.gan_gradient_raw:.3g}, "
            f"{balance.ce_gradient_raw:.3g}); balancing gamma {balance.suggested_gamma:.3g}"
        )
        out["gamma"] = asdict(balance)
    path = spec.run_dir / "tuning.json"
    write_atomically(path, lambda p: p.write_text(json.dumps(out, indent=2)))
    print(f"wrote {path}")


def _delta_ratios(
    features: list[torch.Tensor],
    fields: list[list[int]],
    labels: np.ndarray,
    settings: GAFMSettings,
    tune: dict[str, Any],
    fraction: float,
    seed: int,
) -> DeltaSelection:
    """Table D.6's row for ``fraction`` of the rows, printed as it comes."""
    selection = select_delta(
        features,
        labels,
        settings,
        candidates=[float(d) for d in tune["deltas"]],
        fraction=fraction,
        repeats=int(tune["repeats"]),
        seed=seed,
        fields=fields,
    )
    where = "the whole table" if fraction == 1 else f"{fraction:g} subsets"
    print(f"Delta on {where} ({tune['repeats']} repeats): average leak AUC / train AUC")
    for delta, ratio in selection.ratios.items():
        parts = "  ".join(f"{a} {v:.3f}" for a, v in selection.per_attack[delta].items())
        mark = "  <- smallest" if delta == selection.best else ""
        print(f"  Delta {delta:<5g} ratio {ratio:.3f}  ({parts}){mark}")
    return selection


def _selection_record(selection: DeltaSelection) -> dict[str, Any]:
    """``tuning.json``'s record of one selection (keys as strings)."""
    record = {str(k): v for k, v in asdict(selection).items() if k != "ratios"}
    record["ratios"] = {str(k): v for k, v in selection.ratios.items()}
    record["per_attack"] = {str(k): v for k, v in selection.per_attack.items()}
    return record


if __name__ == "__main__":
    sys.exit(run_hydra_main("simulations.gafm_tune", main))
