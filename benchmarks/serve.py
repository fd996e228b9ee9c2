"""`aiayn serve` under load on loopback: requests/s and p50/p99 latency at 1, 8, 32 and 64
concurrent clients, dynamic batching on and off, against the same requests sent one at a time.

    python benchmarks/serve.py [--run RUN] [--clients 1 8 32 64] [--requests 192] [--time-limit 60]
                               [--max-queue-delay-ms 5] [--max-batch-tokens 4096]

The model: --run (a trained run, sent lines of its test split... or any text with --input), else
the demo experiment's size (d_model 128, 2+2 layers, vocabulary 1000) with random weights, saved
as a slim checkpoint with a word-level tokenizer, decode.max_len_b 20 so that every output stops
at input length + 20 tokens (a random model seldom ends a sentence itself). Each request is one
sentence of 8 to 16 tokens, translated with the run's beam (4). The server runs in its own
process with the machine's cores; the clients are threads of this one, each with one keep-alive
connection, sending until --requests are answered or --time-limit seconds have passed.

"One at a time" is one client with batching off: each request sent after the last was answered.
The ratio column is each row's requests/s over that row's.
"""

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from common import experiment, save_slim_checkpoint

from aiayn.builder.model.build import build_model


def demo_checkpoint(path: Path, seed: int = 0) -> None:
    import torch

    torch.manual_seed(seed)
    spec = experiment(d_model=128, heads=4, layers=2, d_ff=512, vocab=1000, overrides=("decode.max_len_b=20",))
    save_slim_checkpoint(build_model(spec.model).eval(), spec.model_dump(mode="json"), path)


def sentences(n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(f"t{t}" for t in rng.integers(4, 1000, rng.integers(8, 17))) for _ in range(n)]


class Serving:
    """`aiayn serve MODEL --port 0 ARGS` in its own process, until stop()."""

    def __init__(self, model: str, *args: str, log: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "aiayn", "serve", model, "--port", "0", "--log-level", "warning", *args],
            stdout=subprocess.DEVNULL, stderr=log.open("w"),
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while (found := re.search(r"on http://127\.0\.0\.1:(\d+) ", log.read_text())) is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise SystemExit(f"aiayn serve did not start:\n{log.read_text()}")
            time.sleep(0.1)
        self.port = int(found.group(1))

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)


def load(port: int, lines: list[str], clients: int, limit: int, seconds: float) -> tuple[float, list[float]]:
    """`clients` threads sending one line a request until `limit` are answered or `seconds` pass:
    (requests/s, each request's latency in seconds)."""
    latencies: list[float] = []
    taken = iter(range(limit))
    lock = threading.Lock()
    start = time.perf_counter()

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.perf_counter() - start < seconds:
            with lock:
                i = next(taken, None)
            if i is None:
                break
            body = json.dumps({"lines": [lines[i % len(lines)]]})
            sent = time.perf_counter()
            connection.request("POST", "/translate", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"request {i}: HTTP {response.status}")
            with lock:
                latencies.append(time.perf_counter() - sent)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(latencies) / (time.perf_counter() - start), latencies


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", help="a trained run or checkpoint (default: the demo's size, random weights)")
    p.add_argument("--input", type=Path, help="the lines to send (default: random word-level sentences)")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 64])
    p.add_argument("--requests", type=int, default=192, help="requests a row at most")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds a row at most")
    p.add_argument("--max-queue-delay-ms", default="5")
    p.add_argument("--max-batch-tokens", default="4096")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="aiayn-serve-bench-") as work:
        model = args.run
        if model is None:
            model = str(Path(work) / "demo.ckpt")
            demo_checkpoint(Path(model))
        lines = args.input.read_text().splitlines() if args.input else sentences(max(args.requests, 64))
        print(f"model: {args.run or 'the demo size, random weights (decode.max_len_b 20)'}; {os.cpu_count()} CPUs; "
              f"{args.requests} requests a row, one line each, at most {args.time_limit:.0f} s")  # fmt: skip
        rows = []
        for batching in (False, True):
            flags = ["--max-queue-delay-ms", args.max_queue_delay_ms, "--max-batch-tokens", args.max_batch_tokens]
            server = Serving(model, *(flags if batching else ["--no-batching"]), log=Path(work) / "serve.log")
            try:
                load(server.port, lines[:4], 1, 4, 30)  # warm-up
                for clients in args.clients:
                    rate, latencies = load(server.port, lines, clients, args.requests, args.time_limit)
                    rows.append((batching, clients, rate, latencies))
                    p50, p99 = np.percentile(latencies, [50, 99]) * 1000
                    print(f"  batching {'on ' if batching else 'off'} {clients:3d} clients: {rate:7.2f} req/s, "
                          f"p50 {p50:7.1f} ms, p99 {p99:7.1f} ms ({len(latencies)} requests)", flush=True)  # fmt: skip
            finally:
                server.stop()
    one_at_a_time = next(rate for batching, clients, rate, _ in rows if not batching and clients == 1)
    print("\n| batching | clients | requests/s | p50 ms | p99 ms | x one at a time |\n|---|---:|---:|---:|---:|---:|")
    for batching, clients, rate, latencies in rows:
        p50, p99 = np.percentile(latencies, [50, 99]) * 1000
        print(f"| {'on' if batching else 'off'} | {clients} | {rate:.2f} | {p50:.1f} | {p99:.1f} | {rate / one_at_a_time:.2f} |")
    print(f"\none at a time: {one_at_a_time:.2f} req/s (median latency {statistics.median(rows[0][3]) * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
