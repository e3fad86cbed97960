"""The baselines audit's split of a table into members, non-members and reference rows."""

from __future__ import annotations

import pandas as pd
import pytest

from flwr_vflgan.simulations.baseline_audit import split_rows


def test_the_three_sets_are_disjoint_random_and_repeat_under_a_seed():
    frame = pd.DataFrame({"row": range(50)})
    members, non_members, reference = split_rows(frame, 10, 25, seed=3)
    assert (len(members), len(non_members), len(reference)) == (10, 10, 25)
    sets = [set(t["row"]) for t in (members, non_members, reference)]
    assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
    assert sets[0] != set(range(10))  # drawn, not the first rows
    again = split_rows(frame, 10, 25, seed=3)
    assert all(a.equals(b) for a, b in zip(again, (members, non_members, reference), strict=True))
    assert not split_rows(frame, 10, 25, seed=4)[0].equals(members)


def test_too_few_rows_name_the_settings_to_lower():
    with pytest.raises(
        ValueError, match=r"needs 2 x audit.train_rows .* = 45 rows and the dataset has 40"
    ):
        split_rows(pd.DataFrame({"row": range(40)}), 10, 25, seed=0)
