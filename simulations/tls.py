"""A throwaway PKI for a deployment on 127.0.0.1: a CA, the SuperLink's TLS certificate and
one SuperNode authentication key pair per party.

For tests and local trials only: the CA's key is discarded, the certificates live a day,
and every file is written unencrypted into one folder. A real deployment uses its
organisation's certificates (docs/deployment.md, "Security and firewalls").
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_PEM = serialization.Encoding.PEM


@dataclass(frozen=True)
class LocalPKI:
    """Where :func:`make_local_pki` wrote each file."""

    ca_cert: Path
    """The CA certificate every client trusts (``root-certificates``)."""
    server_cert: Path
    server_key: Path
    node_keys: list[tuple[Path, Path]]
    """Each party's (private, public) SuperNode key, OpenSSH format (ECDSA P-384)."""

    def superlink_args(self) -> list[str]:
        """``flower-superlink`` options: TLS with this CA's certificate, node authentication."""
        return [
            "--ssl-ca-certfile",
            str(self.ca_cert),
            "--ssl-certfile",
            str(self.server_cert),
            "--ssl-keyfile",
            str(self.server_key),
            "--enable-supernode-auth",
        ]

    def node_args(self, party: int) -> list[str]:
        """A party node's options: trust the CA, authenticate with the party's key."""
        private, public = self.node_keys[party]
        return [
            "--root-certificates",
            str(self.ca_cert),
            "--auth-supernode-private-key",
            str(private),
            "--auth-supernode-public-key",
            str(public),
        ]


def make_local_pki(directory: Path, n_nodes: int, host: str = "127.0.0.1") -> LocalPKI:
    """Write a CA, a TLS certificate for ``host`` (and ``localhost``) signed by it, and
    ``n_nodes`` node key pairs into ``directory``; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca = _certificate(
        _name("flwr-vflgan local CA"), _name("flwr-vflgan local CA"), ca_key, ca_key, now
    )
    server_key = ec.generate_private_key(ec.SECP384R1())
    names = [x509.IPAddress(ipaddress.ip_address(host)), x509.DNSName("localhost")]
    server = _certificate(_name(host), ca.subject, server_key, ca_key, now, names)
    pki = LocalPKI(directory / "ca.crt", directory / "server.pem", directory / "server.key", [])
    pki.ca_cert.write_bytes(ca.public_bytes(_PEM))
    pki.server_cert.write_bytes(server.public_bytes(_PEM))
    pki.server_key.write_bytes(
        server_key.private_bytes(
            _PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    for i in range(n_nodes):
        key = ec.generate_private_key(ec.SECP384R1())
        private, public = directory / f"node-{i}", directory / f"node-{i}.pub"
        private.write_bytes(
            key.private_bytes(
                _PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
            )
        )
        private.chmod(0o600)
        public.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
            )
        )
        pki.node_keys.append((private, public))
    return pki


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    signer: ec.EllipticCurvePrivateKey,
    now: datetime.datetime,
    alt_names: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if alt_names is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return builder.sign(signer, hashes.SHA256())
