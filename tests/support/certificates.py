"""Self-signed certificates for the TLS tests (HTTPS targets, SMTP with STARTTLS or implicit TLS)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def make_certificate(folder: Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (cert, key), made with the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is not installed (apt-get install openssl)")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key
