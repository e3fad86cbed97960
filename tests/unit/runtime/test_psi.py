"""Private set intersection of the parties' IDs (runtime/psi.py): the blinding commutes,
the leader's match finds exactly the common IDs in one order, and the messages decode or
raise ProtocolError."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import ConfigRecord, RecordDict

from flwr_vflgan.runtime import protocol as P
from flwr_vflgan.runtime import psi
from flwr_vflgan.runtime.codec import ProtocolError

SALT = b"run salt"


def test_blinding_commutes_and_hides_the_id():
    points = psi.hash_ids(["alice", "bob", 42], SALT)
    a, b = psi.new_secret(), psi.new_secret()
    assert psi.blind(a, psi.blind(b, points)) == psi.blind(b, psi.blind(a, points))
    assert psi.blind(a, points) != points and len(set(psi.blind(a, points))) == 3
    # The salt binds the points to the run; the same text gives the same point.
    assert psi.hash_ids(["alice"], b"other") != psi.hash_ids(["alice"], SALT)
    assert psi.hash_ids([42], SALT) == psi.hash_ids(["42"], SALT)


def _run_psi(id_lists: list[list[object]]) -> tuple[list[int], list[list[int]]]:
    """The protocol's arithmetic for parties holding ``id_lists`` (each in its own order),
    returning the leader's kept positions and the others' positions."""
    secrets = [psi.new_secret() for _ in id_lists]
    blinded = [
        psi.blind(k, psi.hash_ids(ids, SALT)) for k, ids in zip(secrets, id_lists, strict=True)
    ]
    own_double = [psi.blind(k, blinded[0]) for k in secrets[1:]]  # k_j B_0
    others_double = [psi.blind(secrets[0], b) for b in blinded[1:]]
    return psi.common_positions(own_double, others_double)


def test_the_match_finds_exactly_the_common_ids_in_the_leaders_order():
    rng = np.random.default_rng(0)
    lists = [
        [int(i) for i in rng.permutation(np.arange(0, 60))],
        [int(i) for i in rng.permutation(np.arange(20, 90))],
        [int(i) for i in rng.permutation(np.arange(10, 50))],
    ]
    keep, positions = _run_psi(lists)
    common = [lists[0][p] for p in keep]
    assert sorted(common) == list(range(20, 50))
    for j, theirs in enumerate(positions, start=1):
        assert [lists[j][p] for p in theirs] == common  # the same IDs in the same order


def test_no_common_id_or_a_repeated_one_is_refused():
    with pytest.raises(ValueError, match="no ID in common"):
        _run_psi([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="blinded IDs repeat"):
        _run_psi([[1, 2], [2, 2]])


def test_a_point_of_small_order_or_the_wrong_size_is_refused():
    with pytest.raises(ProtocolError, match="small order"):
        psi.blind(psi.new_secret(), [bytes(32)])
    with pytest.raises(ProtocolError, match="32 bytes"):
        psi.blind(psi.new_secret(), [bytes(31)])


def test_messages_round_trip():
    points = psi.hash_ids([1, 2, 3], SALT)
    blind = psi.PsiBlind(SALT, 1, points)
    assert psi.PsiBlind.from_content(blind.to_content()) == psi.PsiBlind(SALT, 1, points)
    series = psi.PsiBlind(SALT, series=True)  # the start of an alignment of series files
    assert psi.PsiBlind.from_content(series.to_content()).series is True
    lists = psi.PsiLists([points, points[:1]], own=[points[1:]])
    decoded = psi.PsiLists.from_content(lists.to_content())
    assert [list(x) for x in decoded.lists] == [points, points[:1]]
    assert [list(x) for x in decoded.own] == [points[1:]]
    positions = psi.PsiPositions([[2, 0], [1, 3]])
    assert [list(p) for p in psi.PsiPositions.from_content(positions.to_content()).positions] == [
        [2, 0],
        [1, 3],
    ]
    assert psi.PsiKept.from_content(psi.PsiKept(7).to_content()).kept == 7


@pytest.mark.parametrize(
    "fields",
    [
        {"salt": b"", "partition_id": 0, "blinded": b"x" * 33},
        {"salt": b"", "partition_id": "0", "blinded": b""},
        {"lists": [b"x" * 31], "own": []},
        {"parties": 1, "p0": [0, 0]},
        {"parties": 1, "p0": [-1]},
        {"parties": 2, "p0": [1], "p1": [1, 2]},
    ],
)
def test_malformed_messages_raise_protocol_errors(fields: dict):
    content = RecordDict({P.PSI: ConfigRecord(fields)})
    decoders = [psi.PsiBlind.from_content, psi.PsiLists.from_content, psi.PsiPositions.from_content]
    for decode in decoders:
        with pytest.raises(ProtocolError):
            decode(content)
    with pytest.raises(ProtocolError, match="beyond the 2 IDs"):
        psi.PsiPositions.from_content(psi.PsiPositions([[5]]).to_content(), bound=2)
