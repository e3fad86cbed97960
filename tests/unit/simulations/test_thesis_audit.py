"""The thesis attack's split and settings (``audit.scheme=thesis_mia``)."""

from __future__ import annotations

import pandas as pd
import pytest

from flwr_vflgan.simulations.audit_config import AuditConfig
from flwr_vflgan.simulations.thesis_audit import split_members, thesis_mia_markdown


def test_members_and_unseen_rows_are_disjoint_random_and_repeat_under_a_seed():
    frame = pd.DataFrame({"row": range(50)})
    members, unseen = split_members(frame, 20, 10, seed=3)
    assert (len(members), len(unseen)) == (20, 30)
    assert not set(members["row"]) & set(unseen["row"])
    assert set(members["row"]) != set(range(20))
    assert split_members(frame, 20, 10, seed=3)[0].equals(members)
    with pytest.raises(ValueError, match=r"train_rows=45 rows and needs audit.targets=10 unseen"):
        split_members(frame, 45, 10, seed=0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"train_rows": None}, "give audit.train_rows=<n> of at least 100"),
        ({"train_rows": 50}, "give audit.train_rows=<n> of at least 100"),
        ({"targets": 0}, "audit.targets must be an integer >= 1"),
        ({"outlier_shares": (0.5, 1.5)}, "audit.outlier_shares must list shares in [0, 1]"),
        ({"outlier_shares": ()}, "audit.outlier_shares must list shares in [0, 1]"),
    ],
)
def test_bad_settings_are_refused_by_name(fields: dict, message: str):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        AuditConfig(scheme="thesis_mia", **fields)


def test_the_report_lists_every_share_and_draw():
    summary = {
        "algorithm": "vdgan", "dataset": "adult", "dp": "none", "claimed_epsilon": None,
        "train_rows": 500, "outliers": 200, "synthetic_rows": 1000, "targets": 100,
        "repetitions": 2,
        "results": [
            {"outlier_share": 0.0, "accuracy_mean": 0.5, "accuracy_std": 0.01,
             "accuracies": [0.49, 0.51]},
            {"outlier_share": 1.0, "accuracy_mean": 0.6, "accuracy_std": 0.0,
             "accuracies": [0.6, 0.6]},
        ],
    }  # fmt: skip
    text = thesis_mia_markdown(summary)
    assert "| 0% | 0.500 ± 0.010 | 0.49, 0.51 |" in text
    assert "| 100% | 0.600 ± 0.000 | 0.60, 0.60 |" in text
