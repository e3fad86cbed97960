"""VT-GAN settings, proportional widths and the partition layouts (paper 001, Fig. 6)."""

from __future__ import annotations

import pytest

from flwr_vflgan.vtgan.config import VTGANSettings, proportional_split
from flwr_vflgan.vtgan.server import ClientShape, plan_layout


def test_proportional_split_hand_values() -> None:
    # 256 over 7 and 8 columns: 119.47 and 136.53 -> 119 and 137 (largest remainder).
    assert proportional_split(256, [7, 8]) == [119, 137]
    assert proportional_split(256, [1, 1, 1]) == [86, 85, 85]
    assert proportional_split(10, [1, 9]) == [1, 9]
    # every part at least 1 even when a share rounds to 0
    assert proportional_split(3, [1, 100, 100]) == [1, 1, 1]
    assert sum(proportional_split(768, [3, 4, 4, 2, 2])) == 768


def test_proportional_split_errors() -> None:
    with pytest.raises(ValueError, match="weights must be positive integers"):
        proportional_split(10, [1, 0])
    with pytest.raises(ValueError, match="cannot split 2 into 3 parts"):
        proportional_split(2, [1, 1, 1])


def test_default_partition_is_d20_g02() -> None:
    assert VTGANSettings().partition_name == "D2_0-G0_2"


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("g_server_blocks", -1, "g_server_blocks must be an integer >= 0"),
        ("d_client_blocks", 1.5, "d_client_blocks must be an integer >= 0"),
        ("latent_dim", 0, "latent_dim must be a positive integer"),
        ("dropout", 1.0, r"dropout must be in \[0, 1\)"),
        ("gumbel_tau", 0.0, "gumbel_tau must be > 0"),
        ("weight_decay", -1e-6, "weight_decay must be >= 0"),
        ("shuffle", "yes", "shuffle must be true or false"),
        ("mode_weight_threshold", 1.0, r"mode_weight_threshold must be in \[0, 1\)"),
        ("point_mass_share", 0.0, r"point_mass_share must be null or in \(0, 1\)"),
        ("point_mass_share", True, r"point_mass_share must be null or in \(0, 1\)"),
    ],
)
def test_settings_validation(name: str, value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        VTGANSettings(**{name: value})  # type: ignore[arg-type]


def test_the_mixed_type_encoder_is_on_by_default_and_its_share_is_saved() -> None:
    """A configuration names its share, null included: a run saved before the encoder
    was on by default (no key) is not taken for one of today's defaults' runs."""
    assert VTGANSettings().point_mass_share == 0.1
    assert VTGANSettings().to_dict()["point_mass_share"] == 0.1
    plain = VTGANSettings(point_mass_share=None)
    assert plain.to_dict()["point_mass_share"] is None
    assert VTGANSettings.from_dict(plain.to_dict()) == plain
    assert VTGANSettings.from_dict(VTGANSettings().to_dict()) == VTGANSettings()
    saved_before = {k: v for k, v in plain.to_dict().items() if k != "point_mass_share"}
    assert VTGANSettings.from_dict(saved_before).to_dict() != saved_before


def test_unknown_key_lists_valid() -> None:
    with pytest.raises(ValueError, match=r"unknown vtgan config keys \['blocks'\]; valid"):
        VTGANSettings.from_dict({"blocks": 2})


@pytest.mark.parametrize(
    ("g", "d", "chunks", "features"),
    [
        # G^0_2: the server's Linear keeps latent + cond = 128 + 10 = 138 outputs, split 4:6.
        ((0, 2), (2, 0), [55, 83], [20, 30]),
        # G^2_0: 138 + 2 * 256 = 650 outputs split 4:6.
        ((2, 0), (2, 0), [260, 390], [20, 30]),
        # G^1_1 and D^1_1: one block each side, client FN blocks of 256 split 4:6.
        ((1, 1), (1, 1), [158, 236], [102, 154]),
    ],
)
def test_layouts(g: tuple, d: tuple, chunks: list[int], features: list[int]) -> None:
    settings = VTGANSettings(
        g_server_blocks=g[0], g_client_blocks=g[1], d_server_blocks=d[0], d_client_blocks=d[1]
    )
    shapes = [ClientShape(4, 20, 4), ClientShape(6, 30, 6)]
    layouts, feature_dims = plan_layout(settings, shapes)
    assert [lay.chunk_width for lay in layouts] == chunks
    assert [lay.g_block_width for lay in layouts] == [102, 154]
    assert feature_dims == features
