"""Keep secrets out of what jedictl prints or logs."""

from __future__ import annotations

import re

# user:password@ after the scheme; the user may be empty (`://:secret@host`) and a password that holds
# an unescaped @ is masked up to the last @ before the path (`://u:se@cret@host/db`).
_PASSWORD_IN_URL = re.compile(r"(://[^:/@\s]*:)([^\s/]*)(@)")
_PASSWORD_PARAM = re.compile(r"(?i)\b(password|passwd|pwd)=([^&\s]+)")


def mask_url(text: str) -> str:
    """`text` with any password in a URL (`user:secret@host`, `password=...`) replaced by ***."""
    return _PASSWORD_PARAM.sub(r"\1=***", _PASSWORD_IN_URL.sub(r"\1***\3", text))
