"""GAFM and its baselines over the real Flower path (in-process grid, real ClientApp).

* The Flower run computes exactly what the plain loop computes.
* A short GAFM run on Spambase reaches a useful AUC while its mean-attack leak AUC is
  clearly below vanilla split learning's (paper 002's claim, Table 2).
* The message audit: no message to a non-label party carries labels (or anything but
  configuration, row indices and its own gradient); no reply carries feature columns.
* Bad input is refused with a reason.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import SHARED_DATASETS
from flwr.app import ArrayRecord, ConfigRecord, Message
from omegaconf import DictConfig

from flwr_vflgan.clients import make_client_app
from flwr_vflgan.gafm.config import GAFMSettings, Method
from flwr_vflgan.gafm.data import all_features, spec_labels
from flwr_vflgan.gafm.training import PlainLink, binary_labels, train_repetition
from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime.party_data import DataSpec
from flwr_vflgan.simulations.config import ReproduceConfig
from flwr_vflgan.strategies import InProcessGrid, RunStopped
from flwr_vflgan.strategies.gafm import GAFMStrategy

SPAMBASE = DataSpec(source="spambase", n_parties=2, data_dir=str(SHARED_DATASETS))
SHORT = GAFMSettings(epochs=3, batch_size=256, repetitions=2, eval_every=2)


def _labels(spec: DataSpec) -> tuple[pd.Series, pd.Series, str]:
    return spec_labels(spec)


def _strategy(spec: DataSpec, method: Method, settings: GAFMSettings, **kw: object) -> GAFMStrategy:
    labels, ids, label = _labels(spec)
    return GAFMStrategy(
        method,
        settings,
        n_parties=spec.n_parties,
        seed=7,
        labels=kw.pop("labels", labels),  # type: ignore[arg-type]
        label_ids=kw.pop("label_ids", ids),  # type: ignore[arg-type]
        label=label,
        data_spec=spec,
        timeout=60,
        **kw,  # type: ignore[arg-type]
    )


def _grid(n: int, log: list[Message] | None = None) -> InProcessGrid:
    nodes = [{P.NODE_PARTITION_ID: i, "num-partitions": n} for i in range(n)]
    return InProcessGrid(make_client_app(), nodes, observer=log.append if log is not None else None)


@pytest.mark.parametrize("method", [Method.GAFM, Method.MARVELL])
def test_flower_run_equals_the_plain_loop(method: Method) -> None:
    result = _strategy(SPAMBASE, method, SHORT).start(_grid(2))
    features = [b.encoded for b in all_features(SPAMBASE)]
    labels, _ = binary_labels(_labels(SPAMBASE)[0].to_numpy())
    for rep, flower in enumerate(result.repetitions):
        plain = train_repetition(method, SHORT, labels, PlainLink(features, SHORT), 7 + rep)
        assert flower.seed == plain.seed == 7 + rep
        assert flower.test_auc == plain.test_auc and flower.train_auc == plain.train_auc
        assert flower.leak_auc_per_party == plain.leak_auc_per_party
        assert flower.steps == plain.steps == 3 * 13  # ceil(3221 / 256) batches per epoch
        assert [h["test_auc"] for h in flower.history] == [h["test_auc"] for h in plain.history]
    # Per repetition: setup, 39 steps, 1 apply-only + 1 prediction at the epoch-2
    # record and at the end.
    assert result.exchanges == 2 * (1 + 39 + 2 + 2)
    assert result.summary["repetitions"] == 2
    assert result.n_rows == 4601 and 0.39 < result.positive_rate < 0.40


def test_k_steps_per_exchange_over_flower_equal_the_plain_loop_at_the_same_k() -> None:
    """13 batches an epoch in blocks of 5 (5, 5, 3): messages, packing and restored state
    change nothing, and K = 5 trains differently from K = 1 (stale gradients)."""
    settings = replace(SHORT, steps_per_exchange=5, repetitions=1)
    result = _strategy(SPAMBASE, Method.GAFM, settings).start(_grid(2))
    features = [b.encoded for b in all_features(SPAMBASE)]
    labels, _ = binary_labels(_labels(SPAMBASE)[0].to_numpy())
    plain = train_repetition(Method.GAFM, settings, labels, PlainLink(features, settings), 7)
    (flower,) = result.repetitions
    assert flower.steps == plain.steps == 39
    assert (
        flower.test_auc == plain.test_auc and flower.leak_auc_per_party == plain.leak_auc_per_party
    )
    # Per epoch 3 blocks; the epoch-2 record and the end each add an apply and a prediction.
    assert result.exchanges == 1 + 3 * 3 + 2 + 2
    one = train_repetition(Method.GAFM, SHORT, labels, PlainLink(features, SHORT), 7)
    assert one.test_auc != plain.test_auc


def test_short_gafm_on_spambase_is_useful_and_leaks_less_than_vanilla() -> None:
    spec = DataSpec(source="spambase", n_parties=1, data_dir=str(SHARED_DATASETS))
    features = [b.encoded for b in all_features(spec)]
    labels, _ = binary_labels(_labels(spec)[0].to_numpy())
    settings = GAFMSettings(epochs=150, eval_every=0, repetitions=1)
    torch.set_num_threads(1)
    gafm = train_repetition(Method.GAFM, settings, labels, PlainLink(features, settings), 0)
    vanilla = train_repetition(Method.SPLITNN, settings, labels, PlainLink(features, settings), 0)
    assert gafm.test_auc > 0.85, gafm
    assert vanilla.test_auc > 0.9, vanilla
    # Vanilla's gradients give the labels away; GAFM's are mixed (measured: 1.00 vs 0.65-0.75).
    assert vanilla.leak_auc["mean"] > 0.95
    assert gafm.leak_auc["mean"] < vanilla.leak_auc["mean"] - 0.15
    assert gafm.leak_auc["median"] < vanilla.leak_auc["median"] - 0.15


def _arrays(message: Message) -> dict[str, np.ndarray]:
    out = {}
    for name, record in message.content.items():
        if isinstance(record, ArrayRecord):
            for key, array in record.items():
                out[f"{name}.{key}"] = array.numpy()
    return out


def _config(message: Message) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, record in message.content.items():
        if isinstance(record, ConfigRecord):
            out.update({f"{name}.{k}": v for k, v in record.items()})
    return out


@pytest.mark.parametrize("k", [1, 3])
def test_audit_labels_never_reach_a_party_and_features_never_reach_the_server(k: int) -> None:
    log: list[Message] = []
    settings = GAFMSettings(
        epochs=2, batch_size=512, repetitions=1, eval_every=1, steps_per_exchange=k
    )
    _strategy(SPAMBASE, Method.GAFM, settings).start(_grid(2, log))
    to_parties = [m for m in log if m.metadata.reply_to_message_id == ""]
    replies = [m for m in log if m.metadata.reply_to_message_id != ""]
    assert to_parties and replies
    raw, _, label = _labels(SPAMBASE)
    y, _ = binary_labels(raw.to_numpy())
    allowed_to_party = {f"{P.GRADS}.{P.CUT}", f"{P.ROW_INDICES}.{P.ROW_INDICES}"}
    allowed_config = {
        "config.protocol_version", "config.settings", "config.data_spec", "config.label",
        "config.seed", "config.step", "config.apply", "config.forward", "config.batch_rows",
    }  # fmt: skip
    for message in to_parties:
        arrays = _arrays(message)
        assert set(arrays) <= allowed_to_party, set(arrays)
        assert set(_config(message)) <= allowed_config, set(_config(message))
        # The label's name travels (so a party can refuse a file holding it); no value does.
        assert _config(message).get("config.label", label) == label
        rows = arrays.get(f"{P.ROW_INDICES}.{P.ROW_INDICES}")
        if rows is not None:
            assert rows.dtype == np.int64
            assert not np.array_equal(rows, y[rows]), "row indices equal to the labels"
        grads = arrays.get(f"{P.GRADS}.{P.CUT}")
        if grads is not None:
            assert grads.dtype == np.float32 and grads.shape[1] == 1
            # A gradient is no copy of a label vector, of 0.5 +- u, or of its complement.
            assert len(np.unique(grads)) > 2
    parties = all_features(SPAMBASE)
    for reply in replies:
        arrays = _arrays(reply)
        assert set(arrays) <= {f"{P.FEATURES}.{P.CUT}"}, set(arrays)
        config = _config(reply)
        assert set(config) <= {
            "config.partition_id", "config.n_rows", "config.id_digest", "config.n_features",
            "config.columns",
        }  # fmt: skip
        if "config.columns" in config:  # the setup reply: names only, never the label
            names = [str(n) for n in cast(list, config["config.columns"])]
            pid = int(cast(int, config["config.partition_id"]))
            assert names == list(parties[pid].schema.names)
            assert _labels(SPAMBASE)[2] not in names
        for values in arrays.values():
            # One cut value per row: a 28- or 29-column block cannot hide in it.
            assert values.shape[1] == 1
            for block in parties:
                raw_columns = block.frame.to_numpy(dtype=np.float64)
                encoded = block.encoded.numpy()
                for column in range(raw_columns.shape[1]):
                    n = len(values)
                    for table in (raw_columns, encoded):
                        assert not np.allclose(values[:, 0], table[:n, column])


def _reproduce_base(epochs: int, repetitions: int) -> DictConfig:
    """The reproduce command's configuration less its ``reproduce`` node: GAFM on
    Spambase at batch 512."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from flwr_vflgan.simulations.config import register_configs

    register_configs()
    with initialize_config_module("flwr_vflgan.conf", version_base=None):
        cfg = compose(
            "reproduce",
            overrides=[
                "algorithm=gafm",
                f"dataset.data_dir={SHARED_DATASETS}",
                f"gafm.epochs={epochs}",
                f"gafm.repetitions={repetitions}",
                "gafm.batch_size=512",
            ],
        )
    return OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "reproduce"])


def test_reproduce_grid_and_table_for_paper_002(tmp_path: Path) -> None:
    from flwr_vflgan.simulations import reproduce_gafm
    from flwr_vflgan.simulations.config import to_run_spec

    rc = ReproduceConfig(
        datasets=("spambase",), algorithms=("gafm", "splitnn"), seeds=(3,), out_dir=str(tmp_path)
    )
    base = _reproduce_base(epochs=2, repetitions=2)
    specs = reproduce_gafm.paper002_specs(base, rc, "spambase", "gafm")
    assert [s.data.n_parties for s in specs] == [1, 3]
    assert [s.run_dir.name for s in specs] == ["gafm-1party", "gafm-3parties"]
    assert all(s.seed == 3 and s.algorithm.gafm.repetitions == 2 for s in specs)
    from flwr_vflgan.simulations.families import run_experiment

    results = [(s, run_experiment(s)) for s in specs]
    assert reproduce_gafm.finished(specs[0]) == json.loads(
        (specs[0].run_dir / "metrics.json").read_text()
    )
    other = to_run_spec(base, specs[0].run_dir)  # another configuration: not reused
    assert reproduce_gafm.finished(other) is None
    text = reproduce_gafm.render(reproduce_gafm.summarise(results))
    assert "## spambase, two-party" in text and "## spambase, 3 non-label parties" in text
    assert "| GAFM | ours (2 seeds) |" in text
    assert (
        "| | paper | 0.93 | 0.91 | 0.95 | 0.56 ± 0.04 | - | 0.67 ± 0.05 | - | 0.66 ± 0.05 |" in text
    )
    assert "| | paper | 0.86 ± 0.15 |" in text
    report = (specs[1].run_dir / "report.md").read_text()
    assert "F = average" in report and "Leak AUC per party" in report
    # Paper 002's Figure 2: the first seed's last epoch, prediction against gradient.
    assert "## Prediction against gradient (paper 002, Figure 2)" in report
    assert (specs[1].run_dir / "gradients.png").stat().st_size > 0
    trace = pd.read_csv(specs[0].run_dir / "gradients.csv")
    assert list(trace.columns) == ["label", "prediction", "gradient", "gan", "ce"]
    # Spambase's 3,680 training rows at batch 512: the last epoch's 8 batches.
    assert len(trace) == 2_000 and set(trace["label"]) == {0, 1}
    np.testing.assert_allclose(trace["gan"] + trace["ce"], trace["gradient"], atol=1e-6)


def test_bad_input_is_refused_with_a_reason(tmp_path: Path) -> None:
    labels, ids, label = _labels(SPAMBASE)
    three = labels.astype(str).copy()
    three.iloc[:10] = "2"
    with pytest.raises(ValueError, match="exactly two label values"):
        _strategy(SPAMBASE, Method.GAFM, SHORT, labels=three)
    with pytest.raises(ValueError, match="label IDs"):
        _strategy(SPAMBASE, Method.GAFM, SHORT, label_ids=ids.iloc[:-1])
    shifted = _strategy(SPAMBASE, Method.GAFM, SHORT, label_ids=ids + 1)
    with pytest.raises(RunStopped, match="do not line up with the labels"):
        shifted.start(_grid(2))
    # A party whose own file holds the label column refuses to run.
    table = pd.DataFrame(
        {"c0": np.linspace(0, 1, 50), "c1": np.arange(50) % 7, label: np.arange(50) % 2}
    )
    path = tmp_path / "party-0.csv"
    table.insert(0, "row_id", range(50))
    table.to_csv(path, index=False)
    grid = InProcessGrid(make_client_app(), [{P.NODE_PARTITION_ID: 0, P.NODE_DATA_PATH: str(path)}])
    strategy = GAFMStrategy(
        Method.GAFM, SHORT, n_parties=1, seed=0, labels=np.arange(50) % 2,
        label_ids=pd.Series(range(50)), label=label, timeout=30,
    )  # fmt: skip
    with pytest.raises(RunStopped, match="contains the label column 'spam'"):
        strategy.start(grid)


def test_malformed_blocks_get_error_replies() -> None:
    """A party checks a block's batch sizes against its own gafm.steps_per_exchange and
    the row indices against their sum."""
    from flwr.app import RecordDict

    from flwr_vflgan.runtime.codec import indices_to_record

    settings = GAFMSettings(epochs=1, batch_size=256, repetitions=1, steps_per_exchange=2)
    from flwr_vflgan.strategies.gafm import _FlowerLink

    grid = _grid(2)
    node = sorted(grid.get_node_ids())[0]
    # The parties are set up through the real setup exchange.
    _FlowerLink(_strategy(SPAMBASE, Method.GAFM, settings), grid, [node, node + 1]).start(7)

    def send(sizes: list[int], rows: int) -> Message:
        fields = {"step": 0, "apply": False, "forward": True, "batch_rows": sizes}
        content = RecordDict({P.CONFIG: ConfigRecord(fields)})
        content[P.ROW_INDICES] = indices_to_record({P.ROW_INDICES: np.arange(rows)})
        (reply,) = grid.pull_messages(list(grid.push_messages([Message(content, node, P.GF_STEP)])))
        return reply

    reply = send([4, 4, 4], 12)
    assert (
        reply.has_error() and "1 to gafm.steps_per_exchange=2 batches, got 3" in reply.error.reason
    )
    reply = send([4, 0], 4)
    assert reply.has_error() and "at least one row" in reply.error.reason
    reply = send([4, 4], 7)
    assert reply.has_error() and "must have shape (8,)" in reply.error.reason
    assert not send([4, 4], 8).has_error()


def test_reproduce_runs_gafms_ablations_and_draws_figure_3(tmp_path: Path) -> None:
    from flwr_vflgan.simulations import reproduce_gafm
    from flwr_vflgan.simulations.families import run_experiment

    rc = ReproduceConfig(
        datasets=("spambase",),
        algorithms=("gafm",),
        seeds=(0,),
        out_dir=str(tmp_path),
        gafm_parties=(1,),
        gafm_ablations=True,
    )
    base = _reproduce_base(epochs=1, repetitions=1)
    specs = reproduce_gafm.paper002_specs(base, rc, "spambase", "gafm")
    assert [s.run_dir.name for s in specs] == [
        "gafm-1party", "gafm-gan_only-1party", "gafm-ce_only-1party",
    ]  # fmt: skip
    assert [s.algorithm.gafm.ablation for s in specs] == [None, "gan_only", "ce_only"]
    # Without the setting, the ablations are not run; the baselines never have them.
    plain = replace(rc, gafm_ablations=False)
    assert len(reproduce_gafm.paper002_specs(base, plain, "spambase", "gafm")) == 1
    assert len(reproduce_gafm.paper002_specs(base, rc, "spambase", "splitnn")) == 1
    results = [(s, run_experiment(s)) for s in specs]
    text, table = reproduce_gafm.write(results, rc)
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    names = [line.split("|")[1].strip() for line in rows[1:]]
    # GAFM has the paper's Table 2 row under it; the ablations have none.
    assert names == ["GAFM", "", "GAN-only", "CE-only"], rows
    assert set(table["spambase"]["1"]) == {"gafm", "gafm-gan_only", "gafm-ce_only"}
    assert (tmp_path / "paper002_figure3.png").stat().st_size > 0
    assert "![Figure 3: test AUC against leak AUC](paper002_figure3.png)" in text


def test_the_delta_helper_compares_the_subsets_with_the_whole_table(tmp_path: Path) -> None:
    """``simulations.gafm_tune tune.full_data=true``: Table D.6's two rows, whether the
    subsets' choice is among the three smallest whole-table ratios, and Figure D.1."""
    import subprocess
    import sys

    out = tmp_path / "tune"
    done = subprocess.run(
        [
            sys.executable, "-m", "simulations.gafm_tune", "gafm.epochs=2", "tune.repeats=1",
            "tune.deltas=[0.05,0.3,0.5,0.1]", "tune.full_data=true", "tune.gamma=false",
            f"dataset.data_dir={SHARED_DATASETS}", f"hydra.run.dir={out}",
        ],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((out / "tuning.json").read_text())
    subset, full = result["delta"], result["delta_full"]
    assert set(subset["ratios"]) == set(full["ratios"]) == {"0.05", "0.3", "0.5", "0.1"}
    three = sorted(full["ratios"], key=lambda d: (full["ratios"][d], float(d)))[:3]
    assert full["smallest_three"] == [float(d) for d in three]
    assert full["chosen_among_them"] == (subset["best"] in full["smallest_three"])
    assert (out / "delta.png").stat().st_size > 0
    assert "among the three smallest whole-table ratios" in done.stdout
