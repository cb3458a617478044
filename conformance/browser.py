"""The "browser" of the conformance runs: `python -m conformance.browser <url>` (set as BROWSER).

nerve opens sign-in links with Python's `webbrowser`, which runs the BROWSER command. The suite's
authorization endpoint signs in at once and redirects to nerve's loopback callback, so fetching the
link and following its redirects is all a person's browser would do there. Proxies are ignored:
every address here is on this machine. Exit code 0 when the last page answered 2xx.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

TIMEOUT = 15.0


def visit(url: str) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=TIMEOUT) as page:
            print(f"browser: {page.status} {page.url}", file=sys.stderr)
            return 0
    except urllib.error.HTTPError as error:
        print(f"browser: {error.code} {error.url}", file=sys.stderr)
    except (urllib.error.URLError, OSError) as error:
        print(f"browser: could not open {url}: {error}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m conformance.browser <url>", file=sys.stderr)
        sys.exit(2)
    sys.exit(visit(sys.argv[1]))
