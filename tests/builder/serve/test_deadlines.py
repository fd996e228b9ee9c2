"""`aiayn serve`'s deadlines, each on a server of its own (the slow tier): a request past its
timeout_s (or the server's --request-timeout-s) is answered 504 and its decoding stopped between
steps, the call counted as stopped and never as a batch decoded; in a merged batch the others go on
to what each gets alone; a body that does not all arrive in time is a 408."""

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.builder.serve.server import Server, make_runs

pytestmark = pytest.mark.slow  # servers of their own
LONG = " ".join(["two dogs saw a cat"] * 8)  # 145 tokens of the demo's tokenizer: each line decodes up to 145 + max_len_b steps


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("deadlines"))


def until_idle(server: Server) -> dict:
    """/health once nothing runs or waits (bounded: at most 6000 looks, 10 ms apart)."""
    for _ in range(6000):
        health = server.get("/health")[1]
        if health["running"] == 0 and health["queued"] == 0:
            return health
        time.sleep(0.01)
    raise AssertionError(f"the server is still busy: {health}")


def counts(health: dict) -> dict:
    return {k: health[k] for k in ("requests", "batches", "cancelled", "failed")}


def test_a_request_past_its_timeout_is_a_504_and_its_decoding_stops(runs, tmp_path):
    """The call is stopped between its steps: it ends without an answer (no batch counted), where
    decoding on would have ended in one; then the server answers the next request."""
    server = Server(runs["base"], log=tmp_path / "log")
    try:
        status, answer = server.post("/translate", {"lines": [LONG] * 64, "beam": 4, "max_len_b": 200, "timeout_s": 0.3})
        message = "timeout_s: no answer within 0.3 s; its work was stopped (a request may ask for up to 60 s: aiayn serve --request-timeout-s)"
        assert (status, answer) == (504, {"error": message, "field": "timeout_s"})
        assert counts(until_idle(server)) == {"requests": 0, "batches": 0, "cancelled": 1, "failed": 0}
        assert server.post("/translate", {"lines": ["the dog"]})[0] == 200
        assert counts(server.get("/health")[1]) == {"requests": 1, "batches": 1, "cancelled": 1, "failed": 0}
        status, metrics = server.get("/metrics")
        assert 'aiayn_requests_total{path="/translate",status="504"} 1.0' in metrics
    finally:
        assert server.stop() == 0


def test_the_servers_own_timeout_applies_to_a_request_that_names_none(runs, tmp_path):
    server = Server(runs["base"], "--request-timeout-s", "0.3", log=tmp_path / "log")
    try:
        status, answer = server.post("/translate", {"lines": [LONG] * 32, "n_best": 4, "max_len_b": 200})
        message = (
            "no answer within this server's 0.3 s (aiayn serve --request-timeout-s); its work was stopped: send fewer lines, "
            "or ask for less (a smaller beam or n_best, fewer new tokens)"
        )
        assert (status, answer) == (504, {"error": message})
        assert counts(until_idle(server)) == {"requests": 0, "batches": 0, "cancelled": 1, "failed": 0}
        assert server.post("/translate", {"lines": ["the dog"], "max_len_b": 3})[0] == 200
    finally:
        assert server.stop() == 0


def test_in_a_merged_batch_the_late_request_is_stopped_and_the_others_get_what_they_get_alone(runs, tmp_path):
    """Two requests of the same settings in one 300 ms window are one call (timeout_s does not
    split a batch); the one past its deadline is a 504, the other its answer alone."""
    server = Server(runs["base"], "--max-queue-delay-ms", "300", log=tmp_path / "log")
    options = {"beam": 8, "max_len_b": 200}
    try:
        with ThreadPoolExecutor(2) as pool:
            late = pool.submit(server.post, "/translate", {"lines": [LONG] * 24, "timeout_s": 1.0, **options})
            time.sleep(0.05)
            other = pool.submit(server.post, "/translate", {"lines": ["the dog", "two dogs saw a cat"], **options})
            assert late.result()[0] == 504
            status, merged = other.result()
        health = until_idle(server)
        assert status == 200 and counts(health) == {"requests": 1, "batches": 1, "cancelled": 1, "failed": 0}
        assert health["items"] == 26  # both requests' lines went through the one call
        assert server.post("/translate", {"lines": ["the dog", "two dogs saw a cat"], **options}) == (200, merged)
    finally:
        assert server.stop() == 0


def test_a_body_that_does_not_arrive_in_time_is_a_408(runs, tmp_path):
    server = Server(runs["base"], "--request-timeout-s", "0.5", log=tmp_path / "log")
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as slow:
            slow.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            answer = slow.recv(65536).decode()
        head, _, body = answer.partition("\r\n\r\n")
        assert head.startswith("HTTP/1.1 408 "), answer
        error = json.loads(body)
        assert error["error"] == "the body did not all arrive within 0.5 s (aiayn serve --request-timeout-s)"
        assert server.post("/translate", {"lines": ["the dog"]})[0] == 200
    finally:
        assert server.stop() == 0


def test_a_client_that_leaves_a_stream_stops_its_decoding(runs, tmp_path):
    """The client reads the first event, then closes: the call ends between two steps (no batch
    counted, where decoding on would have ended in one)."""
    server = Server(runs["base"], log=tmp_path / "log")
    try:
        body = json.dumps({"lines": [LONG] * 64, "beam": 1, "max_len_b": 200, "stream": True}).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as leaving:
            leaving.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
            read = b""
            while b"data: " not in read:
                read += leaving.recv(4096)
        assert read.startswith(b"HTTP/1.1 200 ") and b"content-type: text/event-stream" in read.lower()
        assert counts(until_idle(server)) == {"requests": 0, "batches": 0, "cancelled": 1, "failed": 0}
        assert server.post("/translate", {"lines": ["the dog"]})[0] == 200
    finally:
        assert server.stop() == 0


def test_a_light_request_is_answered_while_a_heavy_one_decodes(runs, tmp_path):
    """With --heavy-request-gb 0.01 a 64-line beam search is heavy (its own lane, one thread): a
    one-line request sent while it decodes is answered while it still does."""
    server = Server(runs["base"], "--heavy-request-gb", "0.01", log=tmp_path / "log")
    heavy = {"lines": [LONG] * 64, "beam": 4, "max_len_b": 200, "timeout_s": 30.0}
    try:
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(server.post, "/translate", heavy)
            for _ in range(3000):  # bounded: 30 s
                if server.get("/health")[1]["lanes"]["heavy"]["running"] == 1:
                    break
                time.sleep(0.01)
            assert server.post("/translate", {"lines": ["the dog"]})[0] == 200
            lanes = server.get("/health")[1]["lanes"]
            assert lanes == {"light": {"queued": 0, "running": 0}, "heavy": {"queued": 0, "running": 1}}
            running.result()
    finally:
        assert server.stop() == 0
