"""`aiayn serve` under load on loopback: requests/s and p50/p99 latency at 1, 8, 32 and 64
concurrent clients, dynamic batching on and off, against the same requests sent one at a time.

    python benchmarks/serve.py [--run RUN] [--clients 1 8 32 64] [--requests 192] [--time-limit 60]
                               [--max-queue-delay-ms 5] [--max-batch-tokens 4096]
    python benchmarks/serve.py --mixed [--requests 200] [--time-limit 60]

--mixed: two models of the demo's size, 8 good clients sending four kinds of request (GOOD), alone
and then beside one abusive client sending the most the default limits let a request ask; prints
the good clients' requests/s and p50/p99 in each phase, their p99 ratio and the server's memory.

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
    """`aiayn serve MODEL... --port 0 ARGS` in its own process, until stop()."""

    def __init__(self, *args: str, log: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "aiayn", "serve", *args, "--port", "0", "--log-level", "warning"],
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
    return send_load(port, [{"lines": [lines[i % len(lines)]]} for i in range(limit)], clients, seconds)


GOOD = [  # (model, what a good client asks): short and long lines, beam and sampling, two models
    ("a", {"beam": 4}, 1, (8, 16)),
    ("a", {"beam": 2}, 1, (40, 48)),
    ("b", {"sampling": True, "n_best": 2, "top_k": 20}, 1, (8, 16)),
    ("b", {"beam": 4}, 2, (8, 16)),
]


def good_requests(n: int, seed: int = 2) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        model, options, lines, (low, high) = GOOD[i % len(GOOD)]
        texts = [" ".join(f"t{t}" for t in rng.integers(4, 1000, rng.integers(low, high + 1))) for _ in range(lines)]
        out.append({"model": model, "lines": texts, **options, **({"seed": i} if options.get("sampling") else {})})
    return out


def abusive_request() -> bytes:
    """The most a request may ask of the server's defaults: 150 lines of 1,000 tokens (under
    --max-request-bytes), beam 16, n-best 16, 256 new tokens (its batch is under
    --max-batch-memory-gb; its work makes it heavy)."""
    line = " ".join(f"t{4 + i % 996}" for i in range(1000))
    return json.dumps({"model": "a", "lines": [line] * 150, "beam": 16, "n_best": 16, "max_len_b": 256}).encode()


def send_load(port: int, requests: list[dict], clients: int, seconds: float) -> tuple[float, list[float]]:
    """`clients` threads, each with one keep-alive connection, sending `requests` to /translate in turn until all
    are answered or `seconds` pass: (requests/s, each request's latency in seconds)."""
    latencies: list[float] = []
    taken, lock, start = iter(requests), threading.Lock(), time.perf_counter()

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.perf_counter() - start < seconds:
            with lock:
                body = next(taken, None)
            if body is None:
                break
            sent = time.perf_counter()
            connection.request("POST", "/translate", json.dumps(body), {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"{body}: HTTP {response.status}"[-300:])
            with lock:
                latencies.append(time.perf_counter() - sent)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(latencies) / (time.perf_counter() - start), latencies


class Abuser(threading.Thread):
    """One client sending the abusive request again and again (each on a new connection) until stop()
    closes its connection, counting the answers by status."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.body, self.statuses, self.done = port, abusive_request(), [], threading.Event()
        self.socket = None

    def run(self) -> None:
        import socket

        while not self.done.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=300) as sock:
                    self.socket = sock
                    head = b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(self.body) + self.body)
                    answer = sock.recv(64)
                    if answer:
                        self.statuses.append(int(answer.split()[1]))
            except OSError:
                return

    def stop(self) -> None:
        import socket

        self.done.set()
        if self.socket is not None:
            try:
                self.socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.join(120)


def peak_memory(pid: int) -> tuple[float, float]:
    """(now, peak) resident GiB of a process (/proc/PID/status' VmRSS and VmHWM)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return tuple(int(fields[k].split()[0]) / 2**20 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def mixed(work: Path, clients: int, n: int, seconds: float) -> None:
    """Good clients alone, then beside one abusive client: their throughput and p50/p99, and the server's memory."""
    for seed in (0, 1):
        demo_checkpoint(work / f"{'ab'[seed]}.ckpt", seed=seed)
    server = Serving(f"a={work / 'a.ckpt'}", f"b={work / 'b.ckpt'}", log=work / "serve.log")
    try:
        send_load(server.port, good_requests(8), 2, 60)  # warm-up
        print(f"mixed workload: {clients} good clients, {n} requests ({len(GOOD)} kinds, two models), at most {seconds:.0f} s; "
              f"{os.cpu_count()} CPUs")  # fmt: skip
        results = {}
        for phase in ("alone", "beside the abusive client"):
            abuser = Abuser(server.port) if phase != "alone" else None
            if abuser is not None:
                abuser.start()
                time.sleep(2.0)  # its request queued and decoding
            rate, latencies = send_load(server.port, good_requests(n), clients, seconds)
            if abuser is not None:
                abuser.stop()
            p50, p99 = np.percentile(latencies, [50, 99]) * 1000
            results[phase] = p99
            now, peak = peak_memory(server.process.pid)
            extra = f"; the abusive client's answers: {abuser.statuses or 'none yet'}" if abuser is not None else ""
            print(f"  good clients {phase}: {rate:6.2f} req/s, p50 {p50:7.1f} ms, p99 {p99:7.1f} ms ({len(latencies)} "
                  f"requests); server memory {now:.2f} GiB, peak {peak:.2f} GiB{extra}", flush=True)  # fmt: skip
        ratio = results["beside the abusive client"] / results["alone"]
        print(f"p99 beside the abusive client / alone: {ratio:.2f}x")
    finally:
        server.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", help="a trained run or checkpoint (default: the demo's size, random weights)")
    p.add_argument("--input", type=Path, help="the lines to send (default: random word-level sentences)")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 64])
    p.add_argument("--requests", type=int, default=192, help="requests a row at most")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds a row at most")
    p.add_argument("--max-queue-delay-ms", default="5")
    p.add_argument("--max-batch-tokens", default="4096")
    p.add_argument("--mixed", action="store_true", help="the mixed workload, alone and beside an abusive client, instead")
    args = p.parse_args()
    if args.mixed:
        with tempfile.TemporaryDirectory(prefix="aiayn-serve-bench-") as work:
            mixed(Path(work), 8, args.requests, args.time_limit)
        return
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
