"""What nerve will not remember: values shaped like secrets.

A memory is sent to the model on later turns and shown in lists, so a key or a password in one would
travel far from where it was said. The key and token shapes are detect-secrets' detectors (AWS,
chat platforms, GitHub, JWTs, private keys, URLs with passwords, `api_key = …`, …); what people say in words
("my password is …") and long random strings are the two rules added here.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

# Shapes, not secrets: an address is not a credential.
_NOT_SECRETS = {"IPPublicDetector"}

# "password is …", "the wifi password for guests is …", "pass: …": a keyword, a few words saying whose
# or what for, then the value.
_FOR = r"(for|of|to|on|at|the|my|our|your|his|her|their|this|that|guests?|wi-?fi|admin|root|server|account|"
_FOR += r"db|database|router|door|alarm|safe|phone|laptop|e-?mail|vpn|\w+'s)"
_SAID = re.compile(
    r"\b((password|passwd|pwd|passphrase|passcode|pin( code)?|secret|api[ _-]?key|access[ _-]?key|"
    r"deploy[ _-]?key|private[ _-]?key|token|credentials?)"
    rf"(\s+{_FOR}){{0,4}}\s*(is|are|was|=|:)|pass:)\s*\S+",
    re.IGNORECASE,
)
_URL = re.compile(r"https?://\S+", re.IGNORECASE)
# 24 or more characters of letters and digits (and -_/+=.) mixing both, as generated keys are.
_RANDOM = re.compile(r"(?<![\w/.-])(?=[\w/+=.-]*\d)(?=[\w/+=.-]*[A-Za-z])[\w/+=.-]{24,}(?![\w/.-])")


@cache
def _plugins() -> dict[str, Any]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    plugins: list[type] = list(get_mapping_from_secret_type_to_class().values())
    names = sorted(plugin.__name__ for plugin in plugins)
    used = [name for name in names if "Entropy" not in name and name not in _NOT_SECRETS]
    return {"plugins_used": [{"name": name} for name in used]}


def secret_kind(text: str) -> str | None:
    """What kind of secret `text` seems to hold ("a GitHub Token", "a password"), or None."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import transient_settings

    with transient_settings(_plugins()):
        for line in text.splitlines() or [text]:
            for found in scan_line(line):
                return _article(found.type)
    if said := _SAID.search(text):
        return _article((said.group(2) or "password").lower())
    # An address may well hold a long random path; what is around it may not.
    if _RANDOM.search(_URL.sub(" ", text)):
        return "a key or token"
    return None


def _article(kind: str) -> str:
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"
