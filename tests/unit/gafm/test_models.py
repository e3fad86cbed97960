"""The non-label parties' models (paper 002, Table 1): the MLP, Wide & Deep and the CNN."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

from flwr_vflgan.gafm.config import GAFMSettings
from flwr_vflgan.gafm.models import (
    ImageModel,
    LocalModel,
    WideDeepModel,
    image_shape,
    local_model,
    seeded,
)
from flwr_vflgan.gafm.parties import LocalParty
from flwr_vflgan.runtime.rng import Stream, torch_generator

WIDE_DEEP = GAFMSettings(
    local_model="wide_deep", local_hidden=(4,), embed_dim=2, local_output="linear"
)
CNN = GAFMSettings(local_model="cnn", local_hidden=(120, 84), cut_dim=40, local_output="relu")


def test_the_default_model_is_the_mlp_with_the_same_parameters_as_before() -> None:
    """``local_model`` builds the MLP exactly as ``LocalModel`` did: same draws, same order."""
    settings = GAFMSettings()
    model = seeded(local_model, 5, 7, settings, None)
    before = seeded(LocalModel, 5, 7, settings)
    assert isinstance(model, LocalModel)
    for a, b in zip(model.parameters(), before.parameters(), strict=True):
        assert torch.equal(a, b)


def test_wide_deep_is_a_wide_linear_map_plus_an_mlp_over_field_embeddings() -> None:
    """Two fields of widths 3 and 2 (one-hot), written out by hand."""
    model = seeded(local_model, 0, 5, WIDE_DEEP, [3, 2])
    assert isinstance(model, WideDeepModel)
    x = torch.tensor([[0.0, 1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0, 1.0]])
    emb = model.embedding.detach()
    # Each field's one-hot picks its row of the field's slice of the embedding table.
    deep_in = torch.stack(
        [torch.cat([emb[1], emb[3]]), torch.cat([emb[0], emb[4]])]  # rows 0 and 1
    )
    dense = model.deep
    hidden = torch.relu(deep_in @ dense.hidden[0].weight.T + dense.hidden[0].bias)
    deep = hidden @ dense.out.weight.T + dense.out.bias
    wide = x @ model.wide.weight.T + model.wide.bias
    assert torch.allclose(model(x), wide + deep)
    # The embedding table has one row per encoded column (the reference's
    # Embedding(sum(field_dims), embed_dim)) and the deep input one slot per field.
    assert model.embedding.shape == (5, 2) and model.deep.hidden[0].in_features == 2 * 2


def test_wide_deep_embeds_each_field_on_its_own() -> None:
    """A column's embedding row reaches only its own field's slot of the deep input."""
    model = WideDeepModel([3, 2], WIDE_DEEP)
    x = torch.tensor([[0.0, 1.0, 0.0, 1.0, 0.0]])
    with torch.no_grad():
        model.embedding[4] += 100.0  # column 4 is zero in this row: nothing may change
    before = model(x)
    with torch.no_grad():
        model.embedding[2] += 100.0  # also zero in this row
    assert torch.equal(model(x), before)
    with torch.no_grad():
        model.embedding[3] += 1.0  # the row's own category of field 1
    assert not torch.equal(model(x), before)


def test_wide_deep_needs_fields_that_tile_the_row() -> None:
    with pytest.raises(ValueError, match="needs the width of each of the party's column"):
        local_model(5, WIDE_DEEP, None)
    with pytest.raises(ValueError, match="fields add up to 4 columns, its rows have 5"):
        local_model(5, WIDE_DEEP, [3, 1])
    with pytest.raises(ValueError, match="at least one field of width >= 1"):
        WideDeepModel([3, 0], WIDE_DEEP)


def test_the_cnn_keeps_the_references_shapes_on_64_by_64_images() -> None:
    """conv 3x3 + pool 2, three times: 64 -> 31 -> 14 -> 6, so fc1 reads 32 * 6 * 6."""
    model = local_model(64 * 64, CNN)
    assert isinstance(model, ImageModel)
    assert [c.out_channels for c in model.convs] == [6, 16, 32]
    assert model.dense.hidden[0].in_features == 32 * 6 * 6
    assert [layer.out_features for layer in model.dense.hidden] == [120, 84]
    out = model(torch.randn(3, 64 * 64))
    assert out.shape == (3, 40) and bool((out >= 0).all())  # the reference's final ReLU


def test_the_cnn_reads_a_partys_columns_row_major() -> None:
    """The party's columns are the image row by row: the model equals the same layers
    applied by hand to ``x.view(n, 1, H, W)``."""
    settings = replace(CNN, image_width=32, local_hidden=(8,), cut_dim=2)
    model = local_model(24 * 32, settings)
    assert isinstance(model, ImageModel) and (model.height, model.width) == (24, 32)
    x = torch.randn(2, 24 * 32, generator=torch.Generator().manual_seed(0))
    h = x.view(2, 1, 24, 32)
    for conv in model.convs:
        h = nn.functional.max_pool2d(torch.relu(conv(h)), 2)
    h = torch.relu(model.dense.hidden[0](h.flatten(1)))
    assert torch.allclose(model(x), torch.relu(model.dense.out(h)))


def test_image_shapes_are_checked_with_the_fix_named() -> None:
    assert image_shape(4096, None) == (64, 64) and image_shape(2048, 64) == (32, 64)
    with pytest.raises(ValueError, match=r"4000 is not a square: set gafm.image_width"):
        image_shape(4000, None)
    with pytest.raises(ValueError, match="image_width=60 does not divide the party's 4096"):
        image_shape(4096, 60)
    with pytest.raises(ValueError, match=r"at least 22 x 22 pixels.*got 21 x 21"):
        image_shape(21 * 21, None)


@pytest.mark.parametrize(
    ("settings", "n_columns", "fields"),
    [
        (GAFMSettings(local_dropout=0.5, local_hidden=(8,)), 6, None),
        (replace(WIDE_DEEP, local_dropout=0.5, local_hidden=(6, 4)), 5, [3, 2]),
        (replace(CNN, local_dropout=0.5, local_hidden=(16,), cut_dim=3), 24 * 24, None),
    ],
    ids=["mlp", "wide_deep", "cnn"],
)
def test_a_party_recomputes_its_forward_pass_exactly_when_the_gradient_arrives(
    settings: GAFMSettings, n_columns: int, fields: list[int] | None
) -> None:
    """The step protocol needs the apply pass to reproduce the forward pass (same
    parameters, same dropout masks) for every model."""
    x = torch.randn(40, n_columns, generator=torch.Generator().manual_seed(0))
    party = LocalParty(x, settings, partition_id=1, seed=9, fields=fields)
    twin = copy.deepcopy(party.model)
    rows = np.array([3, 7, 11, 20])
    out = party.forward(rows, step=4)
    again = party.model(x[torch.from_numpy(rows)], torch_generator(9, Stream.DROPOUT, 4, 1))
    assert torch.equal(out, again.detach())
    grad = torch.randn(4, settings.cut_dim, generator=torch.Generator().manual_seed(1))
    party.apply(rows, 4, grad)
    opt = torch.optim.Adam(twin.parameters(), lr=settings.lr_local, betas=settings.betas)
    twin(x[torch.from_numpy(rows)], torch_generator(9, Stream.DROPOUT, 4, 1)).backward(grad)
    opt.step()
    for a, b in zip(party.model.parameters(), twin.parameters(), strict=True):
        assert torch.allclose(a, b)
    with pytest.raises(ValueError, match="gradient must have shape"):
        party.apply(rows, 4, grad[:2])
    # Prediction uses no dropout, so it repeats.
    assert torch.equal(party.predict(rows), party.predict(rows))


def test_the_model_settings_are_validated() -> None:
    with pytest.raises(ValueError, match=r"gafm.local_model must be one of \['mlp', 'wide_deep'"):
        GAFMSettings(local_model="resnet")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"gafm.local_output must be one of .*'relu'"):
        GAFMSettings(local_output="tanh")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"gafm.embed_dim must be a positive integer"):
        GAFMSettings(embed_dim=0)
    with pytest.raises(ValueError, match=r"gafm.image_width must be a positive integer or null"):
        GAFMSettings(image_width=0)
    assert GAFMSettings.from_dict(CNN.to_dict()) == CNN
