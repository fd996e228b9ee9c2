"""`aiayn serve` as a client meets it: a real server process on 127.0.0.1, spoken to over HTTP.
Every endpoint answers what the matching command prints (byte for byte once written as the
command writes it); requests batched together get what each gets alone; a bad request is a 4xx
naming its field and the server goes on; a client that leaves drops its queued work; SIGTERM
answers the requests in flight and exits 0. The tests that start a server of their own (batching
windows, limits, disconnects, SIGTERM) are in the slow tier."""

import http.client
import json
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.builder.cli.test_bad_inputs import cli
from tests.builder.serve.server import Server, make_runs

ORIGIN = "http://page.test"  # the origin the module's server lets a browser call it from (--cors-origin)
LINES = ["she sold eight apples", "we counted two pictures", "", "the dog", "two dogs saw a cat"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("serve"))


@pytest.fixture(scope="module")
def server(runs, tmp_path_factory):
    log = tmp_path_factory.mktemp("log") / "serve.log"
    one = Server(f"base={runs['base']}", f"variant={runs['variant']}", f"lm={runs['lm']}",
                 f"both={runs['base']},{runs['variant']}", "--cors-origin", ORIGIN, "--max-batch-memory-gb", "0.5",
                 log=log)  # fmt: skip
    yield one
    assert one.stop() == 0, log.read_text()


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "src.txt"
    path.write_text("".join(line + "\n" for line in LINES))
    return path


def written(translations, *, scores=False, alignments=False, listed=False, mbr=False):
    """A /translate answer as `aiayn translate` writes it (translate.py's output_lines)."""
    if not (listed or scores or alignments):
        return "".join(group[0]["text"] + "\n" for group in translations)
    rows = []
    for index, group in enumerate(translations):
        for h in group:
            columns = [str(index)] if (listed or scores) else []
            columns += [f"{h['utility'] if mbr else h['score']:.6f}"] if scores else []
            rows.append("\t".join(columns + [h["text"]] + ([h["alignment"]] if alignments else [])))
    return "".join(row + "\n" for row in rows)


CASES = [  # (the request's options, the command's flags, how the command writes them)
    ({}, [], {}),
    ({"n_best": 3, "scores": True}, ["--n-best", "3", "--scores"], {"scores": True, "listed": True}),
    ({"scores": True, "alignments": True, "beam": 2}, ["--scores", "--alignments", "--beam", "2"], {"scores": True, "alignments": True}),
    ({"sampling": True, "n_best": 4, "top_k": 10, "seed": 3, "scores": True},
     ["--sampling", "--n-best", "4", "--top-k", "10", "--seed", "3", "--scores"], {"scores": True, "listed": True}),
    ({"strategy": {"type": "sampling", "top_k": 10}, "n_best": 4, "seed": 3, "scores": True},
     ["--sampling", "--n-best", "4", "--top-k", "10", "--seed", "3", "--scores"], {"scores": True, "listed": True}),
    ({"mbr": "chrf", "n_best": 4, "scores": True}, ["--mbr", "chrf", "--n-best", "4", "--scores"], {"scores": True, "mbr": True}),
    ({"alpha": 1.0, "length_penalty": "fairseq", "n_best": 2}, ["--alpha", "1.0", "--length-penalty", "fairseq", "--n-best", "2"],
     {"listed": True}),
]  # fmt: skip


@pytest.mark.parametrize(("options", "flags", "how"), CASES)
def test_translate_answers_what_aiayn_translate_prints(server, runs, source, options, flags, how):
    status, answer = server.post("/translate", {"model": "variant", "lines": LINES, **options})
    assert status == 200, answer
    code, out, err = cli("translate", runs["variant"], "--input", source, *flags)
    assert code == 0, err
    assert written(answer["translations"], **how) == out
    assert answer["model"] == "variant" and len(answer["translations"]) == len(LINES)


def test_an_ensemble_named_on_the_command_line_is_the_ensemble_translate_decodes(server, runs, source):
    status, answer = server.post("/translate", {"model": "both", "lines": LINES, "n_best": 2, "scores": True})
    code, out, err = cli("translate", runs["base"], runs["variant"], "--input", source, "--n-best", "2", "--scores")
    assert (status, code) == (200, 0), (answer, err)
    assert written(answer["translations"], scores=True, listed=True) == out


def test_score_answers_what_aiayn_score_prints(server, runs, tmp_path):
    src, tgt = tmp_path / "src", tmp_path / "tgt"
    sources, targets = ["she sold eight apples", "the dog"], ["sie verkaufte acht äpfel", ""]
    src.write_text("".join(s + "\n" for s in sources))
    tgt.write_text("".join(t + "\n" for t in targets))
    status, answer = server.post("/score", {"model": "base", "src": sources, "tgt": targets, "alignments": True, "alpha": 1.0})
    code, out, err = cli("score", runs["base"], "--src", src, "--tgt", tgt, "--per-token", "--alignments", "--alpha", "1.0")
    assert (status, code) == (200, 0), (answer, err)
    rows = [
        "\t".join([f"{s['log_prob']:.6f}", str(s["length"]), " ".join(f"{x:.6f}" for x in s["token_log_probs"]),
                   s["alignment"], f"{s['score']:.6f}"])
        for s in answer["scores"]
    ]  # fmt: skip
    assert "".join(r + "\n" for r in rows) == out


def test_a_language_model_generates_and_scores_as_the_commands_do(server, runs, tmp_path):
    prompts = ["she sold", "two", "we counted"]
    status, answer = server.post("/generate", {"model": "lm", "prompts": prompts, "seed": 7, "max_new_tokens": 9, "top_p": 0.9})
    code, out, err = cli("generate", runs["lm"], *[a for p in prompts for a in ("--prompt", p)], "--seed", "7", "-n", "9",
                         "--top-p", "0.9")  # fmt: skip
    assert (status, code) == (200, 0), (answer, err)
    assert "".join(t + "\n" for t in answer["texts"]) == out
    status, answer = server.post("/generate", {"model": "lm", "prompts": prompts, "strategy": "beam", "max_new_tokens": 9})
    code, out, err = cli("generate", runs["lm"], *[a for p in prompts for a in ("--prompt", p)], "--strategy", "beam", "-n", "9")
    assert (status, code) == (200, 0) and "".join(t + "\n" for t in answer["texts"]) == out, (answer, err)
    text = tmp_path / "text"
    text.write_text("she sold eight apples\nthe dog\n")
    status, answer = server.post("/score", {"model": "lm", "text": ["she sold eight apples", "the dog"]})
    code, out, err = cli("score", runs["lm"], "--text", text, "--per-token")
    assert (status, code) == (200, 0), (answer, err)
    rows = ["\t".join([f"{s['log_prob']:.6f}", str(s["length"]), " ".join(f"{x:.6f}" for x in s["token_log_probs"]),
                       f"{s['bpb']:.6f}"]) for s in answer["scores"]]  # fmt: skip
    assert "".join(r + "\n" for r in rows) == out


def test_models_health_and_the_openapi_schema(server, runs):
    import aiayn

    status, models = server.get("/models")
    assert status == 200
    described = {m["name"]: m for m in models["models"]}
    assert list(described) == ["base", "variant", "lm", "both"]
    base = aiayn.load_run(runs["base"], device="cpu")
    assert described["base"]["parameters"] == sum(p.numel() for p in base.model.parameters())
    assert (described["base"]["task"], described["base"]["graph"], described["base"]["ensemble"]) == (
        "translation",
        "encoder-decoder",
        False,
    )
    assert (described["lm"]["task"], described["lm"]["graph"], described["lm"]["endpoints"]) == (
        "language_model", "decoder-only", ["/generate", "/score"])  # fmt: skip
    assert described["both"]["ensemble"] and described["base"]["decode"] == base.spec.decode.model_dump(mode="json")
    assert described["lm"]["decode"] == {  # what /generate uses, not a translation's lengths and batches
        "max_new_tokens": 50, "seed": 1, "strategy": {"type": "sampling", "temperature": 1.0, "top_k": 0, "top_p": 1.0, "epsilon": 0.0},
        "beam": {"beam": 4, "alpha": 0.6, "length_penalty": "gnmt", "early_stopping": True}}  # fmt: skip
    assert described["base"]["tokenizer"] == base.tgt_tokenizer.describe()
    status, health = server.get("/health")
    assert status == 200 and health["status"] == "ok" and health["models"] == ["base", "variant", "lm", "both"]
    status, schema = server.get("/openapi.json")
    assert status == 200 and {"/translate", "/score", "/generate", "/health", "/models"} <= set(schema["paths"])
    assert "n_best" in schema["components"]["schemas"]["TranslateRequest"]["properties"]
    for path in ("/translate", "/score", "/generate"):  # the error bodies documented as the server sends them
        answers = schema["paths"][path]["post"]["responses"]
        assert set(answers) == {"200", "400", "404", "408", "413", "415", "422", "429", "499", "500", "504"}, answers
        assert {answers[s]["content"]["application/json"]["schema"]["$ref"] for s in answers if s != "200"} == {
            "#/components/schemas/ErrorBody"
        }
    assert "HTTPValidationError" not in schema["components"]["schemas"]  # FastAPI's own shape, which it never sends
    assert set(schema["components"]["schemas"]["ErrorBody"]["properties"]) == {"error", "field", "request_id"}
    status, page = server.get("/")
    assert status == 200 and "<title>aiayn serve</title>" in page


BAD = [  # (endpoint, body, status, the answer)
    ("/translate", {"lines": ["a"], "n_bets": 2}, 422, {"error": "n_bets: unknown field; did you mean 'n_best'?", "field": "n_bets"}),
    ("/translate", {"lines": "a dog"}, 422, {"error": "lines: input should be a valid list", "field": "lines"}),
    ("/translate", {"lines": ["a"], "beam": "4"}, 422, {"error": "beam: input should be a valid integer", "field": "beam"}),
    ("/translate", {"lines": ["a"], "scores": "yes"}, 422, {"error": "scores: input should be a valid boolean", "field": "scores"}),
    ("/translate", {"lines": []}, 422,
     {"error": "lines: list should have at least 1 item after validation, not 0", "field": "lines"}),
    ("/translate", {"lines": [1]}, 422, {"error": "lines.0: input should be a valid string", "field": "lines.0"}),
    ("/translate", {}, 422, {"error": "lines: required", "field": "lines"}),
    ("/translate", [], 422, {"error": "the body: expected a JSON object of the request's fields (GET /openapi.json)"}),
    ("/translate", {"lines": ["a"], "model": "bse"}, 404,
     {"error": "model: no model named 'bse'; did you mean 'base'? (GET /models lists them: base, variant, lm, both)", "field": "model"}),
    ("/translate", {"lines": ["a"], "n_best": 9}, 400, {"error": "n_best (9) is more than the beam size (4): a search keeps 4 "
     "hypotheses a sentence; raise beam to at least 9", "field": "n_best"}),
    ("/translate", {"lines": ["a"], "top_k": 3}, 400, {"error": "top_k: it shapes sampling; give sampling=True, or drop it",
                                                        "field": "top_k"}),
    ("/translate", {"lines": ["a"], "model": "lm"}, 400, {"error": "model: 'lm' is a language model: POST /generate", "field": "model"}),
    ("/generate", {"prompts": ["a"]}, 400, {"error": "model: 'base' is a translation model: POST /translate", "field": "model"}),
    ("/generate", {"prompts": [" "], "model": "lm"}, 400,
     {"error": "prompt 1 is empty; give the text to continue (the model starts it with <s> itself)"}),
    ("/score", {"src": ["a"], "tgt": ["b", "c"]}, 422, {"error": "tgt: 1 sources but 2 targets: give one target a source", "field": "tgt"}),
    ("/score", {"text": ["a"]}, 422,
     {"error": "text: 'base' is a translation model: give src and tgt, one target a source", "field": "text"}),
    ("/score", {"model": "lm", "text": ["a"], "alignments": True}, 422,
     {"error": "alignments: a language model scores its lines alone (text, max_tokens)", "field": "alignments"}),
    # the server's own limits (issue 74): a request asks for less, never more
    ("/translate", {"lines": ["a"], "beam": 1000000000}, 400,
     {"error": "beam: 1000000000 is more than this server allows (16; aiayn serve --max-beam)", "field": "beam"}),
    ("/translate", {"lines": ["a"], "sampling": True, "n_best": 17}, 400,
     {"error": "n_best: 17 is more than this server allows (16; aiayn serve --max-n-best)", "field": "n_best"}),
    ("/translate", {"lines": ["a"], "max_input_len": 20000}, 400,
     {"error": "max_input_len: 20000 is more than this server allows (1024; aiayn serve --max-input-len)", "field": "max_input_len"}),
    ("/translate", {"lines": ["a"], "max_len_b": 5000}, 400,
     {"error": "max_len_b: 5000 is more than this server allows (256; aiayn serve --max-new-tokens)", "field": "max_len_b"}),
    ("/translate", {"lines": ["a"], "max_len_a": 100.0}, 400,
     {"error": "max_len_a: 100.0 is more than the model's decode.max_len_a (1.0); a request may lower it only", "field": "max_len_a"}),
    ("/score", {"src": ["a"], "tgt": ["b"], "max_tokens": 10**9}, 400,
     {"error": "max_tokens: 1000000000 is more than this server allows (4096; aiayn serve --max-batch-tokens)", "field": "max_tokens"}),
    ("/generate", {"prompts": ["a"], "model": "lm", "max_new_tokens": 100000}, 400,
     {"error": "max_new_tokens: 100000 is more than this server allows (256; aiayn serve --max-new-tokens)", "field": "max_new_tokens"}),
    ("/translate", {"lines": ["a"], "timeout_s": 61.0}, 400,
     {"error": "timeout_s: 61.0 is more than this server allows (60.0; aiayn serve --request-timeout-s)", "field": "timeout_s"}),
    ("/score", {"src": ["a"], "tgt": ["b"], "timeout_s": 0}, 422,
     {"error": "timeout_s: input should be greater than 0", "field": "timeout_s"}),
    ("/translate", {"lines": ["a"] * 256, "beam": 16, "max_len_b": 256}, 400,  # 4 x 4096 x (262 x 160 + 150) bytes
     {"error": "this request needs up to 0.64 GiB to decode one batch (4,096 rows of 262 positions: sources x beam or "
      "candidates, the longest line and its output), more than this server's 0.5 GiB (aiayn serve --max-batch-memory-gb): "
      "send shorter lines, ask for a smaller beam or fewer candidates, fewer new tokens, or a lower max_tokens"}),
    # no 500 from any input: what is not text, and a temperature the logits cannot be divided by
    ("/translate", {"lines": ["a\ud800"]}, 422,
     {"error": "lines.0: a lone surrogate (U+D800) at character 1: a line is text, one sentence; drop it", "field": "lines.0"}),
    ("/score", {"src": ["a"], "tgt": ["b\u0000"]}, 422,
     {"error": "tgt.0: a control character (U+0000) at character 1: a line is text, one sentence; drop it", "field": "tgt.0"}),
    ("/generate", {"prompts": ["a"], "model": "lm", "temperature": 1e-320}, 400,
     {"error": "temperature (1e-320) is 0 in float32, which the logits are divided in: give 1.4e-45 or more; for the most "
      "probable token take greedy", "field": "temperature"}),
]  # fmt: skip


@pytest.mark.parametrize(("endpoint", "body", "status", "answer"), BAD, ids=[f"{e}-{i}" for i, (e, *_) in enumerate(BAD)])
def test_a_bad_request_is_a_4xx_naming_its_field_and_the_server_goes_on(server, endpoint, body, status, answer):
    assert server.post(endpoint, body) == (status, answer)
    assert server.post("/translate", {"lines": ["the dog"]})[0] == 200


def test_malformed_json_and_other_content_types_are_refused(server):
    assert server.post("/translate", raw=b'{"lines": ["a"') == (400, {"error": "the body is not JSON: Expecting ',' delimiter"})
    refused = server.post("/translate", raw=b"lines=a", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert refused == (
        415,
        {"error": "the body is application/x-www-form-urlencoded: send JSON (Content-Type: application/json)"},
    )
    # one error shape for what FastAPI and Starlette answer themselves, saying what and where (issue 74)
    assert server.request("GET", "/translate") == (405, {"error": "GET /translate: this endpoint takes POST"})
    assert server.get("/nope") == (
        404, {"error": "/nope: no such endpoint (POST /translate, /score, /generate; GET /health, /models, /metrics, /openapi.json, /)"})  # fmt: skip
    json_type = {"Content-Type": "application/json"}
    for raw, headers, answer in [
        (b"", json_type, (422, {"error": "the body is empty: send a JSON object of the request's fields (GET /openapi.json)"})),
        (b'{"lines": ["a"]}', {"Content-Type": ""},
         (415, {"error": "the body has no Content-Type: send JSON (Content-Type: application/json)"})),
        (b'{"lines": ["\xff"]}', json_type, (400, {"error": "the body is not UTF-8: byte 0xff at 12 (JSON's encoding is UTF-8)"})),
        ('{"lines": ["\xe9"]}'.encode("latin-1"), {"Content-Type": "application/json; charset=latin-1"},
         (415, {"error": "the body is declared latin-1: send it as UTF-8 (JSON's encoding)"})),
        (b"[" * 20000 + b"]" * 20000, json_type,
         (400, {"error": "the body nests arrays or objects too deep to read: send the request's fields, one level deep"})),
        (b'{"lines": ["a"], "beam": ' + b"9" * 5000 + b"}", json_type,
         (400, {"error": "the body holds a number of more than 4300 digits, which no field takes"})),
    ]:  # fmt: skip
        assert server.post("/translate", raw=raw, headers=headers) == answer
    assert server.post("/generate", {"prompts": ["a"], "model": "lm", "greedy": True, "top_k": 3}) == (
        400, {"error": "top_k: it shapes sampling, and greedy takes the most probable token: give one or the other", "field": "top_k"})  # fmt: skip
    assert server.post("/generate", {"prompts": ["a"], "model": "lm", "greedy": True, "strategy": "beam"}) == (
        400, {"error": "strategy: it says how to generate, and so does greedy; give one of them", "field": "strategy"})  # fmt: skip
    assert server.post("/translate", {"lines": ["the dog"]})[0] == 200


@pytest.mark.slow  # a server of its own
def test_limits_on_lines_and_bytes_are_named(runs, tmp_path):
    server = Server(runs["base"], "--max-lines", "2", "--max-request-bytes", "200", log=tmp_path / "log")
    try:
        assert server.post("/translate", {"lines": ["a", "b", "c"]}) == (
            413, {"error": "lines: 3 lines, more than this server's max_lines (2); split the request", "field": "lines"})  # fmt: skip
        body = {"lines": ["a" * 300]}
        assert server.post("/translate", body) == (
            413, {"error": "the body has 315 bytes, more than this server's max_request_bytes (200)"})  # fmt: skip
        chunked = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)  # no Content-Length: counted as it comes
        chunked.request("POST", "/translate", body=iter([b'{"lines": ["', b"a" * 300, b'"]}']), encode_chunked=True,
                        headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})  # fmt: skip
        response = chunked.getresponse()
        assert (response.status, {k: v for k, v in json.loads(response.read()).items() if k != "request_id"}) == (
            413, {"error": "the body (sent without a Content-Length) is longer than this server's max_request_bytes (200)"})  # fmt: skip
        chunked.close()
        small = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        small.request("POST", "/translate", body=iter([b'{"lines": ', b'["the dog"]}']), encode_chunked=True,
                      headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})  # fmt: skip
        assert small.getresponse().status == 200
        small.close()
        assert server.post("/translate", {"lines": ["the dog", "a cat"]})[0] == 200
    finally:
        assert server.stop() == 0


@pytest.mark.slow  # a server of its own
def test_requests_batched_together_get_what_each_gets_alone(runs, tmp_path):
    """Twelve clients at once, batched (a 300 ms window gathers them), against each sent alone."""
    server = Server(f"base={runs['base']}", f"lm={runs['lm']}", "--max-queue-delay-ms", "300", log=tmp_path / "log")
    try:
        requests = [("/translate", {"lines": [line, LINES[(i + 1) % 5]], "n_best": 2, "scores": True})
                    for i, line in enumerate(LINES)]  # fmt: skip
        requests += [("/translate", {"lines": [line]}) for line in LINES]
        requests += [("/generate", {"model": "lm", "prompts": [p], "seed": 5, "max_new_tokens": 6}) for p in ("she", "two dogs")]
        with ThreadPoolExecutor(len(requests)) as pool:
            together = list(pool.map(lambda r: server.post(*r), requests))
        health = server.get("/health")[1]
        assert health["requests"] == len(requests) and health["batches"] < len(requests), health  # some were merged
        alone = [server.post(*r) for r in requests]
        assert server.get("/health")[1]["batches"] == health["batches"] + len(requests)  # one at a time: a batch each
        for (s1, a1), (s2, a2) in zip(together, alone):
            assert s1 == s2 == 200
            if "texts" in a1:
                assert a1 == a2
                continue
            texts = [[h["text"] for h in group] for group in a1["translations"]]
            assert texts == [[h["text"] for h in group] for group in a2["translations"]]
            for g1, g2 in zip(a1["translations"], a2["translations"]):  # float32 sums over a padded batch
                assert [h.get("score", 0) for h in g1] == pytest.approx([h.get("score", 0) for h in g2], abs=1e-5)
    finally:
        assert server.stop() == 0


@pytest.mark.slow  # a server of its own
def test_a_request_that_fails_a_merged_batch_answers_for_itself_alone(runs, tmp_path):
    """Two requests of the same settings merged into one call, one line too long: the call fails,
    each request runs again alone, and only the long one gets the error."""
    server = Server(runs["base"], "--max-queue-delay-ms", "500", log=tmp_path / "log")
    try:
        good, bad = {"lines": ["the dog"], "max_input_len": 12}, {"lines": [LINES[0]], "max_input_len": 12}  # 20 tokens
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda body: server.post("/translate", body), [good, bad]))
        health = server.get("/health")[1]
        assert answers[0] == server.post("/translate", good) and answers[0][0] == 200
        assert answers[1] == (400, {"error": "input line 1 has 20 tokens, more than decode.max_input_len (12); split that "
                                  "line, or raise the limit (max_input_len)"})  # fmt: skip
        assert (health["split"], health["requests"], health["failed"], health["batches"]) == (1, 1, 1, 1), health
    finally:
        assert server.stop() == 0


@pytest.mark.slow  # a server of its own
def test_a_client_that_leaves_leaves_no_work_behind(runs, tmp_path):
    """With a 1.5 s batching window the first request waits; a second client sends a request of
    other settings and leaves while it waits: the second is dropped, never decoded."""
    server = Server(runs["base"], "--max-queue-delay-ms", "1500", log=tmp_path / "log")
    try:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(server.post, "/translate", {"lines": ["the dog"]})
            time.sleep(0.3)
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as leaving:
                body = json.dumps({"lines": ["she sold eight apples", "two dogs"], "beam": 2}).encode()
                leaving.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                b"Content-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
                time.sleep(0.3)
            assert first.result()[0] == 200
        time.sleep(0.2)
        health = server.get("/health")[1]
        assert {k: health[k] for k in ("requests", "batches", "items", "cancelled", "queued")} == {
            "requests": 1, "batches": 1, "items": 1, "cancelled": 1, "queued": 0}  # fmt: skip
    finally:
        assert server.stop() == 0


@pytest.mark.slow  # a server of its own
def test_sigterm_answers_the_requests_in_flight_and_exits_0(runs, tmp_path):
    server = Server(runs["base"], "--max-queue-delay-ms", "1500", log=tmp_path / "log")
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(server.post, "/translate", {"lines": ["the dog"]})
        time.sleep(0.5)
        server.process.send_signal(signal.SIGTERM)
        assert waiting.result() == (200, {"model": "demo", "translations": [[{"text": server_text(runs, "the dog")}]]})
    assert server.process.wait(30) == 0, server.log.read_text()
    assert "Shutting down" in server.log.read_text()


def server_text(runs, line):
    import aiayn

    return aiayn.load_run(runs["base"], device="cpu").translate([line])[0]


def test_startup_errors_are_messages(runs):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert cli("serve", runs["base"], "--port", str(port))[::2] == (
            2, f"aiayn serve: error: --port {port}: in use on 127.0.0.1; stop what listens there or give another port\n")  # fmt: skip
    assert cli("serve", f"x={runs['base']}", f"x={runs['variant']}", "--port", "0")[::2] == (
        2, "aiayn serve: error: two models are named 'x': name each as NAME=PATH (aiayn serve base=runs/a variant=runs/b)\n")  # fmt: skip
    assert cli("serve", runs["base"], "--max-lines", "0")[::2] == (2, "aiayn serve: error: --max-lines: give 1 or more, got 0\n")
    assert cli("serve", runs["base"], "--max-beam", "0")[::2] == (2, "aiayn serve: error: --max-beam: give 1 or more, got 0\n")
    assert cli("serve", runs["base"], "--request-timeout-s", "0")[::2] == (
        2, "aiayn serve: error: --request-timeout-s: give more than 0 and at most 86400 seconds, got 0\n")  # fmt: skip
    assert cli("serve", runs["base"], "--max-batch-memory-gb", "inf")[::2] == (
        2, "aiayn serve: error: --max-batch-memory-gb: give more than 0 and at most 1048576 GiB, got inf\n")  # fmt: skip
    code, _, err = cli("serve", f"base={runs['base']}", "--max-beam", "2", "--port", "0")  # the run's own beam is 4
    assert (code, err) == (2, "aiayn serve: error: base: its decode.beam is 4, more than this server allows (2): raise --max-beam, or "
                              "serve it with a lower one (aiayn serve reads the run's decode section)\n")  # fmt: skip
    code, _, err = cli("serve", "no/such/run", "--port", "0")
    assert code == 2 and err.startswith("aiayn serve: error: no/such/run") and "\n" == err[-1] and err.count("\n") == 1


def test_an_error_of_ours_is_a_json_500_and_the_server_goes_on(runs, monkeypatch):
    """A bug in a model call (made here by replacing /score's call): a JSON 500 that names it, and
    the next request is answered (uvicorn in a thread of this process, on a port it picked)."""
    import uvicorn

    from aiayn.builder.cli.serve import listening_socket
    from aiayn.builder.serve import app as serve_app
    from aiayn.builder.serve.served import load_served
    from tests.conftest import registry

    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setitem(serve_app.CALLS, "score", broken)
    sock = listening_socket("127.0.0.1", 0)
    app = serve_app.create_app(load_served([str(runs["base"])], device="cpu", registry=registry()))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        client = Server.__new__(Server)
        client.port = sock.getsockname()[1]
        assert client.post("/score", {"src": ["the dog"], "tgt": ["der hund"]}) == (
            500,
            {"error": "internal error: RuntimeError: boom"},
        )
        assert client.post("/translate", {"lines": ["the dog"]})[0] == 200
    finally:
        server.should_exit = True
        thread.join(30)


def test_every_answer_has_a_request_id_and_a_log_line(server):
    """X-Request-ID: the client's where it gives a usable one, else one made; echoed in the header,
    in an error's body (the client helper checks the two agree) and in the request's log line."""
    assert server.post("/translate", {"lines": ["the dog"]}, headers={"X-Request-ID": "trace-42"})[0] == 200
    assert server.last_headers["x-request-id"] == "trace-42"
    assert server.post("/translate", {"lines": []}, headers={"X-Request-ID": "trace-43"})[0] == 422
    assert server.last_headers["x-request-id"] == "trace-43"  # and in the body: the helper took it out, equal
    made = []
    for given in (None, "has a space", "x" * 129):  # none, or none usable: one is made
        server.get("/health") if given is None else server.request("GET", "/health", headers={"X-Request-ID": given})
        made.append(server.last_headers["x-request-id"])
    assert all(len(m) == 32 and int(m, 16) >= 0 for m in made) and len(set(made)) == 3
    assert server.get("/nope")[0] == 404  # Starlette's own answer has one too
    deadline = time.monotonic() + 10
    while "request trace-43: POST /translate 422 in " not in server.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = server.log.read_text()
    assert "request trace-42: POST /translate 200 in " in log and "request trace-43: POST /translate 422 in " in log
    assert '"POST /translate HTTP/1.1"' not in log  # uvicorn's access line is off: one line a request, the app's


def metric(server, name, **labels):
    """The value of a sample of GET /metrics (0 where it has none yet)."""
    from prometheus_client.parser import text_string_to_metric_families

    status, text = server.get("/metrics")
    assert status == 200 and server.last_headers["content-type"].startswith("text/plain; version=")  # Prometheus text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def test_metrics_count_the_requests_their_tokens_and_batches(server, runs):
    import aiayn

    ok, bad = dict(path="/translate", status="200"), dict(path="/translate", status="422")
    before = {
        "ok": metric(server, "aiayn_requests_total", **ok),
        "bad": metric(server, "aiayn_requests_total", **bad),
        "latency": metric(server, "aiayn_request_duration_seconds_count", path="/translate"),
        "in": metric(server, "aiayn_tokens_in_total", model="base", endpoint="translate"),
        "out": metric(server, "aiayn_tokens_out_total", model="base", endpoint="translate"),
        "batches": metric(server, "aiayn_batch_items_count"),
    }
    status, answer = server.post("/translate", {"lines": ["the dog", "two dogs saw a cat"], "model": "base"})
    assert status == 200 and server.post("/translate", {"lines": "no"})[0] == 422
    translator = aiayn.load_run(runs["base"], device="cpu")
    tokens_in = sum(len(ids) + 1 for ids in translator.input_tokenizer.encode_batch(["the dog", "two dogs saw a cat"]))
    texts = [h["text"] for line in answer["translations"] for h in line]
    tokens_out = sum(len(ids) + 1 for ids in translator.output_tokenizer.encode_batch(texts))
    assert metric(server, "aiayn_requests_total", **ok) == before["ok"] + 1
    assert metric(server, "aiayn_requests_total", **bad) == before["bad"] + 1
    assert metric(server, "aiayn_request_duration_seconds_count", path="/translate") == before["latency"] + 2
    assert metric(server, "aiayn_tokens_in_total", model="base", endpoint="translate") == before["in"] + tokens_in
    assert metric(server, "aiayn_tokens_out_total", model="base", endpoint="translate") == before["out"] + tokens_out
    assert metric(server, "aiayn_batch_items_count") == before["batches"] + 1 and metric(server, "aiayn_queue_depth") == 0
    assert metric(server, "aiayn_requests_total", path="/metrics", status="200") >= 7  # the scrapes count too


def test_cors_lets_the_named_origin_alone_call_the_server(server):
    preflight = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    assert server.request("OPTIONS", "/translate", headers=preflight)[0] == 200
    assert server.last_headers["access-control-allow-origin"] == ORIGIN
    assert server.post("/translate", {"lines": ["the dog"]}, headers={"Origin": ORIGIN})[0] == 200
    assert server.last_headers["access-control-allow-origin"] == ORIGIN
    assert "x-request-id" in server.last_headers["access-control-expose-headers"].lower()
    assert server.request("OPTIONS", "/translate", headers={**preflight, "Origin": "http://other.test"})[0] == 400
    assert server.post("/translate", {"lines": ["the dog"]}, headers={"Origin": "http://other.test"})[0] == 200
    assert "access-control-allow-origin" not in server.last_headers  # the browser refuses it the answer


@pytest.mark.slow  # a server of its own
def test_a_full_queue_is_a_429_with_retry_after_and_the_server_goes_on(runs, tmp_path):
    """--max-queue 1 with batching off: while one long request decodes and one waits (as /health
    says), the next is refused at once with 429 and Retry-After, and answered once the queue has room."""
    server = Server(runs["base"], "--max-queue", "1", "--no-batching", log=tmp_path / "log")
    long = {"lines": [" ".join(["two dogs saw a cat"] * 8)] * 64, "beam": 16, "max_len_b": 200}

    def until(key, value):  # bounded: at most 3000 looks, 10 ms apart
        for _ in range(3000):
            if server.get("/health")[1][key] == value:
                return True
            time.sleep(0.01)
        return False

    try:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(server.post, "/translate", long)
            assert until("running", 1)
            second = pool.submit(server.post, "/translate", long)
            assert until("queued", 1)
            status, answer = server.post("/translate", {"lines": ["the dog"]})
            retry = server.last_headers.get("retry-after")
            assert (first.result()[0], second.result()[0]) == (200, 200)
        message = "the queue is full: 1 waiting, this server's max_queue (1); try again shortly (aiayn serve --max-queue)"
        assert (status, answer, retry) == (429, {"error": message}, "1")
        assert server.post("/translate", {"lines": ["the dog"]})[0] == 200
    finally:
        assert server.stop() == 0


def joined(events):
    """Each output's streamed pieces joined, by index, and the done event's answer."""
    texts: dict[int, str] = {}
    for name, data in events[:-1]:
        assert name == "message", events
        texts[data["index"]] = texts.get(data["index"], "") + data["text"]
    assert events[-1][0] == "done", events
    return texts, events[-1][1]


STREAMED = [  # (endpoint, the request): each streamed is the request unstreamed, piece by piece
    ("/translate", {"model": "variant", "lines": LINES, "beam": 1, "max_len_b": 30}),
    ("/translate", {"model": "base", "lines": LINES, "sampling": True, "seed": 5, "top_k": 8, "scores": True}),
    ("/generate", {"model": "lm", "prompts": ["she sold", "two", "we counted"], "seed": 7, "max_new_tokens": 12}),
    ("/generate", {"model": "lm", "prompts": ["she sold", "the dog"], "greedy": True, "max_new_tokens": 9}),
]  # fmt: skip


@pytest.mark.parametrize(("endpoint", "body"), STREAMED)
def test_a_streamed_answer_is_the_answer_piece_by_piece(server, endpoint, body):
    status, unstreamed = server.post(endpoint, body)
    assert status == 200, unstreamed
    status, events = server.stream(endpoint, {**body, "stream": True})
    texts, done = joined(events)
    assert status == 200 and done == unstreamed
    final = [h[0]["text"] for h in done["translations"]] if endpoint == "/translate" else done["texts"]
    assert [texts.get(i, "") for i in range(len(final))] == final
    assert len(events) > 1 + sum(bool(t) for t in final)  # pieces as they came, not the texts at the end alone


def test_what_cannot_stream_is_refused_before_it_starts(server):
    message = ("stream: this decoding keeps 4 rows a source until it ends (a beam of 4, or 4 samples), so there is no one "
               "output to stream: ask for one (beam 1, greedy, or one sample)")  # fmt: skip
    assert server.stream("/translate", {"lines": ["the dog"], "stream": True}) == (
        400,
        [("", {"error": message, "field": "stream"})],
    )
    message = message.replace("4", "3")
    refused = server.stream("/translate", {"lines": ["the dog"], "sampling": True, "n_best": 3, "stream": True})
    assert refused == (400, [("", {"error": message, "field": "stream"})])
    refused = server.stream("/translate", {"lines": ["the dog"], "beam": 1, "detokenize": True, "stream": True})
    message = "stream: detokenize undoes the run's tokenization once an output ends; drop one"
    assert refused == (400, [("", {"error": message, "field": "stream"})])
    assert server.post("/translate", {"lines": ["the dog"]})[0] == 200
