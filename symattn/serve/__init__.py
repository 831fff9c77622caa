"""``symattn serve``: the derivation as an interactive page on 127.0.0.1.

Why a package of its own: the page is a small ASGI app (Starlette, run by uvicorn, the
optional extra ``symattn[serve]``) above the document printers and below the commands.
It reads a problem through the same parser and caps as the CLI (:mod:`.derive`), works it
in a pool of worker processes with a time and memory budget (:mod:`.workers`), and guards
itself against other sites and hosts (:mod:`.app`): see docs/serve.md.
"""
