"""`python -m adapters.healthcheck`: exit 0 when the nerve on this machine answers `/healthz`, else 1.

Standard library only: the image's HEALTHCHECK runs it often and slim images lack curl. The port comes
from the environment, not a `.env` inside the container.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping

# The default of NERVE_HTTP_PORT in bot.config.Settings.
DEFAULT_PORT = 3000
# Well inside the HEALTHCHECK's own timeout, so a hung process is reported as unhealthy by this
# check rather than killed by the container engine.
TIMEOUT = 3.0


def health_url(environ: Mapping[str, str]) -> str:
    """Where `/healthz` answers; a port that cannot be probed (unset is fine, 0 is not) is a ValueError."""
    raw = environ.get("NERVE_HTTP_PORT", "").strip() or str(DEFAULT_PORT)
    port = int(raw) if raw.isdigit() else 0
    if not 0 < port < 65536:
        raise ValueError(f"NERVE_HTTP_PORT={raw} is not a port a health check can reach")
    return f"http://127.0.0.1:{port}/healthz"


def check(url: str, timeout: float = TIMEOUT) -> str | None:
    """None when `url` answers 200; else what went wrong, in words for `docker inspect`."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code}"
    except (OSError, ValueError) as exc:
        return f"{url} did not answer: {exc}"
    return None if status == 200 else f"{url} answered {status}"


def main() -> int:
    try:
        problem = check(health_url(os.environ))
    except ValueError as exc:  # a port that cannot be probed
        problem = str(exc)
    if problem is not None:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
