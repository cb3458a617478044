"""`python -m servers.notes_oauth --port P [--issuer-port Q] [--token-lifetime S] [--log FILE] …`"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from servers.notes_oauth.app import NotesOptions, PortError, serve
from servers.notes_oauth.clients import ClientMetadataError
from servers.notes_oauth.store import StateFileError


def parse_options(argv: list[str] | None = None) -> NotesOptions:
    parser = argparse.ArgumentParser(
        prog="python -m servers.notes_oauth",
        description="An MCP server that needs a per-person OAuth sign-in, with its own authorization server.",
    )
    parser.add_argument("--port", type=int, required=True, help="port of the MCP server (0: any free port)")
    parser.add_argument(
        "--issuer-port",
        type=int,
        help="serve the authorization server on this port instead (0: any free port)",
    )
    parser.add_argument(
        "--token-lifetime", type=int, default=3600, metavar="S", help="access tokens expire after S seconds"
    )
    parser.add_argument(
        "--log", type=Path, metavar="FILE", help="append a line 'call <tool> by <user>' per call"
    )
    parser.add_argument(
        "--state", type=Path, metavar="FILE", help="keep clients, tokens and notes in this JSON file"
    )
    parser.add_argument(
        "--trust-client-metadata",
        action="append",
        default=[],
        metavar="URL=FILE",
        help="accept the client_id URL with the metadata document in FILE (never fetched); repeatable",
    )
    parser.add_argument(
        "--allow-redirect-uri",
        action="append",
        default=[],
        metavar="URI",
        help="a redirect URI any client_id URL may use besides loopback ones; repeatable",
    )
    args = parser.parse_args(argv)
    if args.token_lifetime < 1:
        parser.error("--token-lifetime must be at least 1 second")
    trusted: dict[str, Path] = {}
    for entry in args.trust_client_metadata:
        url, separator, file = entry.partition("=")
        if not separator or not url or not file:
            parser.error(f"--trust-client-metadata takes URL=FILE, not {entry!r}")
        trusted[url] = Path(file)
    return NotesOptions(
        port=args.port,
        issuer_port=args.issuer_port,
        token_lifetime=args.token_lifetime,
        log_file=args.log,
        state_file=args.state,
        trusted_client_metadata=trusted,
        allowed_redirect_uris=tuple(args.allow_redirect_uri),
    )


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    # Configured before the MCP server does it, so records go to stderr as plain lines.
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("servers.notes_oauth").setLevel(logging.INFO)
    try:
        asyncio.run(serve(options))
    except (PortError, StateFileError, ClientMetadataError) as exc:
        print(f"notes-oauth: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
