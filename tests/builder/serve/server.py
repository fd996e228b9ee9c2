"""A real `aiayn serve` process on 127.0.0.1 (the port it picks, --port 0), and a small HTTP
client: the tests talk to it as any client does, over loopback, each request bounded in time."""

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.builder.decode.test_checkpoint import SMALL, demo_tokenizer, make_run, save_task_checkpoint
from tests.conftest import EXPERIMENTS, load_experiment

TIMEOUT = 60  # seconds a request or a start may take at most


def make_lm_run(root: Path, *, seed: int = 3) -> Path:
    """A language model's run (the lm demo, shrunk as test_checkpoint's SMALL), random weights."""
    run_dir = root / "lm-demo" / "version_0"
    demo_tokenizer().save(run_dir / "tokenizer.json")
    overrides = [s for s in SMALL if not s.startswith("decode.")]
    experiment = load_experiment(EXPERIMENTS / "lm" / "demo.yaml", overrides).model_dump(mode="json")
    save_task_checkpoint(run_dir / "checkpoints" / "last.ckpt", experiment, seed=seed)
    return run_dir


def make_runs(root: Path) -> dict[str, Path]:
    """Two translation runs (the demo, different weights) and a language model's."""
    return {"base": make_run(root / "a", seed=21), "variant": make_run(root / "b", seed=5), "lm": make_lm_run(root / "lm")}


class Server:
    """`aiayn serve ARGS --port 0` started, its address read from what it prints; stop() sends SIGTERM."""

    def __init__(self, *args: object, log: Path) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "aiayn", "serve", *map(str, args), "--port", "0"],
            stdout=subprocess.DEVNULL, stderr=log.open("w"), env=env,
        )  # fmt: skip
        deadline = time.monotonic() + TIMEOUT
        while (found := re.search(r"on http://127\.0\.0\.1:(\d+) ", log.read_text())) is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError(f"aiayn serve did not start:\n{log.read_text()}")
            time.sleep(0.05)
        self.port = int(found.group(1))
        while self.get("/health")[0] != 200:  # the socket listens before the app starts
            time.sleep(0.05)

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None, headers: dict | None = None):
        """(status, the JSON answer, or the text where it is not JSON). An error's `request_id` is checked to be
        the response's X-Request-ID and taken out (the tests compare the rest); the headers are `last_headers`."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
        try:
            data = raw if raw is not None else None if body is None else json.dumps(body).encode()
            sent = {"Content-Type": "application/json"} if data is not None else {}
            connection.request(method, path, body=data, headers={**sent, **(headers or {})})
            response = connection.getresponse()
            text = response.read().decode()
        except ConnectionError:
            return 0, None
        finally:
            connection.close()
        self.last_headers = {k.lower(): v for k, v in response.getheaders()}
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return response.status, text
        if response.status >= 400 and isinstance(data, dict):
            assert data.pop("request_id") == self.last_headers["x-request-id"], (data, self.last_headers)
        return response.status, data

    def stream(self, path: str, body: Any) -> tuple[int, list[tuple[str, Any]]]:
        """(status, the server-sent events as (name, data) where the answer is a stream, else [("", the JSON)])."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
        try:
            connection.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            text = response.read().decode()
            kind = response.getheader("Content-Type", "")
        finally:
            connection.close()
        if not kind.startswith("text/event-stream"):
            data = json.loads(text)
            data.pop("request_id", None)
            return response.status, [("", data)]
        events = []
        for block in text.split("\n\n")[:-1]:
            fields = dict(line.split(": ", 1) for line in block.split("\n"))
            events.append((fields.get("event", "message"), json.loads(fields["data"])))
        assert text.endswith("\n\n"), text
        return response.status, events

    def get(self, path: str):
        return self.request("GET", path)

    def post(self, path: str, body: Any = None, **kwargs: Any):
        return self.request("POST", path, body, **kwargs)

    def stop(self) -> int:
        """SIGTERM, then its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
