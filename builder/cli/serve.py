"""aiayn serve MODEL [MODEL ...] [--host 127.0.0.1] [--port 8000]: the models behind HTTP
(builder/serve): JSON endpoints for translate, score and generate, batched dynamically, a page at
/. MODEL is a run, a checkpoint or a Marian folder (PATH), named (NAME=PATH), or an ensemble
(NAME=PATH,PATH). It listens on loopback unless --host says otherwise; it has no authentication.
SIGTERM or Ctrl-C: it stops taking connections, answers those in flight, and exits 0."""

import argparse
import errno
import signal
import socket
import sys
from typing import TYPE_CHECKING

from aiayn.builder.errors import UserError

if TYPE_CHECKING:  # the app needs aiayn[serve]: imported where it is used
    from aiayn.builder.serve.app import Limits


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "models",
        metavar="MODEL",
        nargs="+",
        help="a run, .ckpt or Marian folder; NAME=PATH names it (default: its experiment's name); NAME=PATH,PATH,...: "
        "their ensemble. The first is the default model of a request that names none",
    )
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8000, help="the port (default: 8000; 0: any free one, printed)")
    g = p.add_argument_group("dynamic batching (requests with the same settings decoded together)")
    g.add_argument("--max-batch-tokens", type=int, default=4096, metavar="N", help="tokens a batch holds at most (default: 4096)")
    g.add_argument(
        "--max-queue-delay-ms",
        type=float,
        default=5.0,
        metavar="MS",
        help="how long the oldest request waits for others to join it (default: 5)",
    )
    g.add_argument("--no-batching", action="store_true", help="decode each request alone, in turn")
    g.add_argument(
        "--heavy-request-gb",
        type=float,
        default=0.25,
        metavar="GB",
        help="a request whose lines would hold more than this decoded all at once (estimated from the model's dims) "
        "queues and decodes in a lane of its own, beside the others (default: 0.25)",
    )
    g.add_argument(
        "--heavy-threads", type=int, default=1, metavar="N", help="torch threads of the heavy lane's calls (default: 1)"
    )
    _add_limits(p)
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--log-level", choices=("critical", "error", "warning", "info", "debug"), default="info")


def _add_limits(p: argparse.ArgumentParser) -> None:
    """What one request may ask; how many may wait and connect, and from which origins."""
    g = p.add_argument_group("request limits")
    g.add_argument("--max-lines", type=int, default=256, metavar="N", help="lines (pairs, prompts) a request (default: 256)")
    g.add_argument("--max-request-bytes", type=int, default=1 << 20, metavar="N", help="bytes a request body (default: 1048576)")
    g.add_argument("--max-beam", type=int, default=16, metavar="N", help="the widest beam a request may ask for (default: 16)")
    g.add_argument(
        "--max-n-best",
        type=int,
        default=16,
        metavar="N",
        help="candidates a line: n-best, samples, MBR's references (default: 16)",
    )
    g.add_argument(
        "--max-new-tokens",
        type=int,
        default=256,
        metavar="N",
        help="tokens an output at most: a translation's max_len_b, a continuation's max_new_tokens (default: 256)",
    )
    g.add_argument(
        "--max-batch-memory-gb",
        type=float,
        default=4.0,
        metavar="GB",
        help="GiB a request's largest decoding batch may hold, estimated from the model's dims; more is refused before "
        "it decodes (default: 4)",
    )
    g.add_argument(
        "--max-input-len", type=int, default=1024, metavar="N", help="tokens a request may let an input line have (default: 1024)"
    )
    _add_access(p)


def _add_access(p: argparse.ArgumentParser) -> None:
    """How long a request may take, how many may wait and connect, and from which origins."""
    g = p.add_argument_group("deadlines, backpressure and access")
    g.add_argument(
        "--request-timeout-s",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds from a request's arrival to its answer (its body read within them too): past them a 504, and "
        "its decoding stopped; a request may ask for less, timeout_s (default: 60)",
    )
    g.add_argument(
        "--timeout-keep-alive",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds an idle connection stays open (uvicorn's timeout_keep_alive; default: 5)",
    )
    g.add_argument(
        "--max-queue", type=int, default=256, metavar="N", help="requests waiting at most; one more is a 429 (default: 256)"
    )
    g.add_argument(
        "--max-connections",
        type=int,
        default=1024,
        metavar="N",
        help="open connections at most (uvicorn's limit_concurrency: one more is answered 503; default: 1024)",
    )
    g.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an origin whose pages may call the server (CORS), e.g. https://app.example; repeat for more (default: none)",
    )


def serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from aiayn.builder.serve.app import create_app
    except ImportError as e:
        raise UserError(f"aiayn serve needs {e.name}: pip install 'aiayn[serve]'") from None
    from aiayn.builder.cli.translate import device_of
    from aiayn.builder.serve.served import load_served

    limits = limits_of(args)
    sock = listening_socket(args.host, args.port)  # before the models load: a port in use is said at once
    served = load_served(args.models, device=device_of(args), registry=args.registry)
    app = create_app(served, limits)
    host, port = sock.getsockname()[:2]
    where = f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
    names = ", ".join(f"{s.name} ({s.task})" for s in served)
    print(f"aiayn serve: {names} on {where} (the page: {where}/)", file=sys.stderr, flush=True)
    if host not in ("127.0.0.1", "::1", "localhost"):
        print(
            "aiayn serve: listening beyond this machine, with no authentication: put it behind a proxy that has it",
            file=sys.stderr,
        )
    # each request's log line is the app's (with its id: builder/serve/operations.py), not uvicorn's access line
    config = uvicorn.Config(
        app,
        log_level=args.log_level,
        timeout_graceful_shutdown=None,
        access_log=False,
        limit_concurrency=args.max_connections,
        timeout_keep_alive=args.timeout_keep_alive,
    )
    # uvicorn drains on SIGTERM, then raises it again for the handler it found: this one, so that a drained stop exits 0
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def limits_of(args: argparse.Namespace) -> "Limits":
    """The server's limits, as its flags set them (each one checked)."""
    from aiayn.builder.serve.app import Limits

    for flag, value in (
        ("--max-batch-tokens", args.max_batch_tokens),
        ("--max-lines", args.max_lines),
        ("--max-request-bytes", args.max_request_bytes),
        ("--max-beam", args.max_beam),
        ("--max-n-best", args.max_n_best),
        ("--max-new-tokens", args.max_new_tokens),
        ("--max-input-len", args.max_input_len),
        ("--max-queue", args.max_queue),
        ("--max-connections", args.max_connections),
        ("--heavy-threads", args.heavy_threads),
    ):
        if value < 1:
            raise UserError(f"{flag}: give 1 or more, got {value}")
    for flag, gib in (("--max-batch-memory-gb", args.max_batch_memory_gb), ("--heavy-request-gb", args.heavy_request_gb)):
        if not 0 < gib <= 2**20:
            raise UserError(f"{flag}: give more than 0 and at most 1048576 GiB, got {gib:g}")
    for flag, seconds in (("--request-timeout-s", args.request_timeout_s), ("--timeout-keep-alive", args.timeout_keep_alive)):
        if not 0 < seconds <= 86_400:
            raise UserError(f"{flag}: give more than 0 and at most 86400 seconds, got {seconds:g}")
    if not 0 <= args.max_queue_delay_ms <= 10_000:
        raise UserError(f"--max-queue-delay-ms: give 0 to 10000 milliseconds, got {args.max_queue_delay_ms}")
    return Limits(
        max_lines=args.max_lines,
        max_request_bytes=args.max_request_bytes,
        max_batch_tokens=args.max_batch_tokens,
        max_queue_delay_ms=args.max_queue_delay_ms,
        batching=not args.no_batching,
        max_beam=args.max_beam,
        max_n_best=args.max_n_best,
        max_new_tokens=args.max_new_tokens,
        max_input_len=args.max_input_len,
        max_queue=args.max_queue,
        request_timeout_s=args.request_timeout_s,
        max_batch_memory_gb=args.max_batch_memory_gb,
        heavy_request_gb=args.heavy_request_gb,
        heavy_threads=args.heavy_threads,
        cors_origins=tuple(args.cors_origin),
    )


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, or a message: the port in use, the address not this machine's."""
    if not 0 <= port <= 65535:
        raise UserError(f"--port: give 0 to 65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise UserError(f"--host {host}: not an address of this machine ({e.strerror})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise UserError(f"--port {port}: in use on {host}; stop what listens there or give another port") from None
        raise UserError(f"--host {host} --port {port}: cannot listen there ({e.strerror})") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock
