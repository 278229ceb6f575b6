"""An unusable ``http.ca_file`` is that source's failure, named as the setting to fix, and costs only
the sources that verify TLS with it: a plain-http source with the same settings and every other
target are read all the same (the fetcher against real servers on 127.0.0.1)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from collectors.fetch import Fetcher, Get
from core.settings import HttpSettings
from tests.support.certificates import make_certificate
from tests.support.http_server import serve
from tests.test_http_client import https_url, tls_server


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return make_certificate(tmp_path_factory.mktemp("tls"))


def _missing(tmp: Path, cert: tuple[str, str]) -> str:
    return str(tmp / "nope.pem")


def _directory(tmp: Path, cert: tuple[str, str]) -> str:
    return str(tmp)


def _empty(tmp: Path, cert: tuple[str, str]) -> str:
    (tmp / "empty.pem").write_text("")
    return str(tmp / "empty.pem")


def _garbage(tmp: Path, cert: tuple[str, str]) -> str:
    (tmp / "garbage.pem").write_bytes(b"\x00\xff not a certificate \x1b[2J\n")
    return str(tmp / "garbage.pem")


def _a_key(tmp: Path, cert: tuple[str, str]) -> str:
    return cert[1]  # a private key, not a certificate


def _truncated(tmp: Path, cert: tuple[str, str]) -> str:
    text = Path(cert[0]).read_text()
    (tmp / "cut.pem").write_text(text[: len(text) // 2])
    return str(tmp / "cut.pem")


def _fifo(tmp: Path, cert: tuple[str, str]) -> str:
    os.mkfifo(tmp / "ca.fifo")  # its open waited for a writer, in the event loop every GET shares
    return str(tmp / "ca.fifo")


def _device(tmp: Path, cert: tuple[str, str]) -> str:
    (tmp / "ca.pem").symlink_to("/dev/zero")  # size 0 by stat, and no end
    return str(tmp / "ca.pem")


def _link_chain_to_fifo(tmp: Path, cert: tuple[str, str]) -> str:
    os.mkfifo(tmp / "deep.fifo")  # two links deep: the open follows them to the FIFO, still without blocking
    (tmp / "mid.pem").symlink_to(tmp / "deep.fifo")
    (tmp / "ca.pem").symlink_to(tmp / "mid.pem")
    return str(tmp / "ca.pem")


def _unix_socket(tmp: Path, cert: tuple[str, str]) -> str:
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp / "ca.sock"))  # a socket file where a PEM was expected (kept open while it is used)
    _unix_socket.keep = sock  # type: ignore[attr-defined]
    return str(tmp / "ca.sock")


@pytest.mark.parametrize("make", [_missing, _directory, _empty, _garbage, _a_key, _truncated, _fifo, _device,
                                  _link_chain_to_fifo, _unix_socket])
def test_an_unusable_ca_file_names_the_setting_and_costs_only_its_tls_sources(
        tmp_path, certificate, make: Callable[[Path, tuple[str, str]], str]) -> None:
    bad = HttpSettings(ca_file=make(tmp_path, certificate))
    fetcher = Fetcher()
    try:
        with tls_server(certificate) as sock, serve({"/metrics": (200, "text/plain", "x 1\n")}) as base:
            gets = [Get("tls-bad", https_url(sock), bad, "check targets[].vllm_url"),
                    Get("http-same-settings", base + "/metrics", bad, "check targets[].vllm_url"),
                    Get("http-other", base + "/metrics", HttpSettings(), "check targets[].vllm_url"),
                    Get("tls-good", https_url(sock), HttpSettings(ca_file=certificate[0]), "check targets[].vllm_url")]
            answers = {a.key: a for a in fetcher.fetch_many(gets, 3.0)}
    finally:
        fetcher.close()
    assert answers["http-same-settings"].text == "x 1\n" and answers["http-other"].text == "x 1\n"
    assert answers["tls-good"].text == "ok"
    error = answers["tls-bad"].error
    assert error is not None
    line = error.one_line()
    assert "http.ca_file" in line and "vllm_url" not in line, line
    assert "\x1b" not in line and "\n" not in line
