"""Message types and record keys shared by the VFLGAN strategy and client.

What crosses the wire (paper 000, Fig. 3-4; see docs/protocol.md):

* server -> party: the algorithm configuration (setup), the server's gradients with
  respect to the party's intermediate features, step numbers and flags;
* party -> server: its row count and a SHA-256 digest of its row IDs (setup), its
  intermediate features ``f_i`` and ``f~_i``, and synthetic rows (encoded at evaluation,
  decoded for publication).

Never: raw or encoded real rows, row indices, the shared noise seed, encoder statistics.
"""

from __future__ import annotations

PROTOCOL_VERSION = 3

# Message types ("<category>.<action>", routed by Flower's ClientApp).
SETUP = "query.vflgan_setup"
STEP = "train.vflgan_step"
GENERATE = "evaluate.vflgan_generate"

# Record names inside a message's RecordDict.
CONFIG = "config"
GRADS = "grads"
FEATURES = "features"
SYNTHETIC = "synthetic"

# ArrayRecord keys.
REAL = "real"
FAKE = "fake"
ROWS = "rows"

# Party state records kept in Flower's context.state between messages.
STATE_FLAT = "vflgan.flat"
STATE_META = "vflgan.meta"
STATE_SNAPSHOTS = "vflgan.snapshots"

# node_config keys a party reads from its own settings.
NODE_DATA_PATH = "data-path"
NODE_SHARED_SEED = "shared-seed"
NODE_CHECKPOINT_DIR = "checkpoint-dir"
NODE_PARTITION_ID = "partition-id"
NODE_NOISE_SEED = "noise-seed"
"""Seed of the party's DP noise, known to that party alone (optional)."""
ENV_SHARED_SEED = "FLWR_VFLGAN_SHARED_SEED"

# Shared-seed agreement among the parties (runtime/keys.py): public keys, relayed keys,
# sealed seeds. Used before setup when the run asks for it (runtime.key_agreement).
KEY_OFFER = "query.key_offer"
KEY_SEAL = "query.key_seal"
KEY_OPEN = "query.key_open"
KEYS = "keys"
STATE_KEYS = "keys.party"
"""A party's key-agreement state: its private key, the leader's public key, the run
seed and, once agreed, the shared seed (never sent)."""
NODE_KEY_FILE = "key-file"
"""A party's fixed X25519 private key (a file of 64 hex digits), for pinning."""
NODE_PEER_KEYS = "peer-keys"
"""The public keys a party expects, by partition id (comma-separated hex; pinning)."""

# Row alignment by ID (runtime/psi.py): private set intersection before setup when the
# run asks for it (runtime.align_ids).
PSI_BLIND = "query.psi_blind"
PSI_CROSS = "query.psi_cross"
PSI_MATCH = "query.psi_match"
PSI_APPLY = "query.psi_apply"
PSI = "psi"
STATE_PSI = "psi.party"
"""A party's alignment state: its secret scalar, its secret order of its rows, and once
aligned the rows it trains on, in the common order (never sent)."""

NO_STEP = -1
"""Step field value meaning "nothing to apply" or "no forward pass"."""

# -- VT-GAN (paper 001) ------------------------------------------------------------------
# What crosses the wire: server -> client: configuration, the client's layout, chunks of
# G^t's output, gradients of the client's bottom-discriminator outputs, step numbers and
# which client supplies a step's conditions. client -> server: row count, ID digest,
# column count, encoded width and conditional-vector width (setup); bottom-discriminator
# outputs of fake rows and of real rows (the chosen client's selected rows, every row of
# the others, in the current shuffled order); the chosen client's conditional vectors
# and selected row indices; chunk gradients; decoded, shuffled synthetic rows.
# Never: raw or encoded real rows, the shuffle seed or permutation, encoder statistics.
VT_PROTOCOL_VERSION = 3
VT_SETUP = "query.vtgan_setup"
VT_BUILD = "query.vtgan_build"
VT_STEP = "train.vtgan_step"
VT_GENERATE = "evaluate.vtgan_generate"

CHUNK = "chunk"
ROW_INDICES = "rows"
CONDITION = "condition"
COND = "cond"
COND_REAL = "cond_real"

VT_STATE_META = "vtgan.meta"
VT_STATE_FLAT = "vtgan.flat"
VT_STATE_CHUNK = "vtgan.chunk"
VT_STATE_ORDER = "vtgan.order"
VT_STATE_ENCODER = "vtgan.encoder"

# -- GAFM and its baselines (paper 002) ------------------------------------------------------
# What crosses the wire: label party (server) -> non-label party: configuration, the seed
# of a repetition, row indices of a batch (or of the rows to predict), the gradient of
# the party's own cut values for its last batch, step numbers. Non-label party -> label
# party: row count, ID digest and encoded width (setup); its cut values f_p(X_p) for the
# requested rows. Never: labels, randomized responses or anything computed from them
# other than the gradients; raw or encoded feature columns.
GF_PROTOCOL_VERSION = 3
GF_SETUP = "query.gafm_setup"
GF_STEP = "train.gafm_step"
GF_PREDICT = "evaluate.gafm_predict"

CUT = "cut"
"""Key of a party's cut values (record FEATURES) and of their gradient (record GRADS)."""

GF_STATE_META = "gafm.meta"
GF_STATE_FLAT = "gafm.flat"
GF_STATE_ROWS = "gafm.rows"
