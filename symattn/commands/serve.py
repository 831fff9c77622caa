"""``symattn serve``: the derivation as a page on 127.0.0.1 that re-derives on every edit."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from symattn.commands import Outcome, whole_number_argument
from symattn.commands.explain import add_problem_arguments
from symattn.errors import SymattnError

ORDER = 85
LOCAL = ("127.0.0.1", "localhost")


#: argparse type for ``--port``: 1 to 65535
port_argument = whole_number_argument("--port", 1, 65535)


def budget_argument(text: str) -> float:
    """argparse type for ``--budget``: seconds, 0.5 to 600."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--budget must be a number of seconds, got {text!r}") from None
    if not 0.5 <= value <= 600:
        raise argparse.ArgumentTypeError(f"--budget must be between 0.5 and 600 seconds, got {text}")
    return value


MAX_WORKERS = 16       # worker processes (each holds SymPy: about 100 MB, up to 2 GiB)
MAX_QUEUE = 256        # requests waiting for a worker; more are answered 503 at once


workers_argument = whole_number_argument("--workers", 1, MAX_WORKERS, "worker processes")
WORKER_MEGABYTES = 2048  # a worker's whole address space; one request's --memory is below it
memory_argument = whole_number_argument("--memory", 16, WORKER_MEGABYTES, "MiB")
queue_argument = whole_number_argument("--queue", 0, MAX_QUEUE, "requests waiting for a worker")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("serve", help="an interactive page: edit the inputs, watch the exact "
                            "derivation follow (needs symattn[serve])")
    add_problem_arguments(parser)
    parser.add_argument("--port", type=port_argument, default=8765, help="the port (default 8765)")
    parser.add_argument("--host", default=None, help="the address to bind (default 127.0.0.1; "
                        "anything else lets other machines in: a warning is printed)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="with --host: a name (or address) other machines reach this one by; the "
                             "page answers only the Host headers it knows (repeatable)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.add_argument("--budget", type=budget_argument, default=10.0, metavar="SECONDS",
                        help="the most one derivation may take before the page says to use the CLI "
                             "(default 10)")
    parser.add_argument("--memory", type=memory_argument, default=512, metavar="MB",
                        help="the most memory one derivation or download may take, in MiB over what "
                             "its worker holds, before the page says to use the CLI (default 512, "
                             f"16 to {WORKER_MEGABYTES})")
    parser.add_argument("--workers", type=workers_argument, default=2, metavar="N",
                        help=f"worker processes deriving at once (default 2, at most {MAX_WORKERS})")
    parser.add_argument("--queue", type=queue_argument, default=8, metavar="M",
                        help="requests that may wait for a worker; more are refused at once, 503 "
                             f"(default 8, at most {MAX_QUEUE})")
    parser.set_defaults(run=run)


def starting_problem(args: argparse.Namespace) -> dict[str, Any]:
    """The problem's table (as the page holds it), read and checked the CLI's way (refused
    before any worker is spawned)."""
    from symattn.examples import DEFAULT_EXAMPLE, example_text
    from symattn.problem.problem import Problem
    from symattn.problem.tomlfile import read_text
    from symattn.serve.derive import problem_data

    if args.problem:
        data = problem_data(read_text(args.problem, what="a problem TOML file"), args.problem)
        source = args.problem
    else:
        name = args.example or DEFAULT_EXAMPLE
        data = problem_data(example_text(name), f"example {name!r}")
        source = f"example {name!r}"
    Problem.from_dict(data, source=source)
    return data


WILDCARDS = ("0.0.0.0", "::")


def allowed_hosts(host: str, port: int, extra: tuple[str, ...] = ()) -> frozenset[str]:
    """The Host headers the page answers (DNS rebinding: any other name is refused)."""
    def named(name: str) -> str:
        return f"[{name}]:{port}" if ":" in name else f"{name}:{port}"

    names = {f"127.0.0.1:{port}", f"localhost:{port}", *(named(n) for n in extra)}
    if host not in LOCAL and host not in WILDCARDS:
        names.add(named(host))
    return frozenset(names)


def run(args: argparse.Namespace) -> Outcome:
    try:
        import uvicorn

        from symattn.serve.app import make_app
        from symattn.serve.derive import derive_fragment
        from symattn.serve.workers import WorkerPool
    except ImportError as exc:
        raise SymattnError(f"symattn serve needs {exc.name}: pip install 'symattn[serve]'") from None
    host = args.host or "127.0.0.1"
    if args.allow_host and host in LOCAL:
        raise SymattnError("--allow-host names how other machines reach this one: it needs --host "
                           "(the address to bind, such as 0.0.0.0)")
    if host not in LOCAL:
        print(f"symattn: warning: --host {host}: the page is open to every machine that can reach "
              "this address, with no password", file=sys.stderr)
    if host in WILDCARDS and not args.allow_host:
        print(f"symattn: note: --host {host} binds every address, but the page answers only "
              "127.0.0.1 and localhost until --allow-host NAME names this machine", file=sys.stderr)
    data = starting_problem(args)
    pool = WorkerPool(workers=args.workers, queue=args.queue, budget=args.budget,  # they start now
                      megabytes=WORKER_MEGABYTES, request_megabytes=args.memory)
    try:
        fragment = derive_fragment(data)      # while the workers start
        app = make_app(data, fragment, hosts=allowed_hosts(host, args.port, tuple(args.allow_host)),
                       pool=pool, tex=_has_tex())
        waited = pool.warm()          # the workers' imports and the lesson, before the first request
        url = f"http://{'127.0.0.1' if host in LOCAL else host}:{args.port}/"
        print(f"symattn: serving {url} (Ctrl-C to stop; {args.workers} workers ready in {waited:.1f} s)",
              file=sys.stderr)
        config = uvicorn.Config(app, host=host, port=args.port, log_level="warning")
        _Server(config, None if args.no_browser else url).run()
    finally:
        pool.close()
    return Outcome("")


def _has_tex() -> bool:
    from symattn.document.pdf import PdfError, find_engine

    try:
        find_engine()
    except PdfError:
        return False
    return True


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, opening the browser once the socket is bound (not on a timer)."""

        def __init__(self, config: Any, url: str | None) -> None:
            super().__init__(config)
            self.url = url

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.url is not None and self.started:
                _open_soon(self.url)
    return Server


def _Server(config: Any, url: str | None) -> Any:
    return _server_class()(config, url)


def _open_soon(url: str) -> None:
    import threading
    import webbrowser

    threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
