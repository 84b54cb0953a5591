"""Chrome Trace Event JSON (.json, .json.gz), the format of Kineto, msprof and moetrace.

Read in stages, each module owning one step: `source` (bytes: gzip, pieces, truncation),
`decode` (msgspec: raw JSON-text columns), `values`/`columns` (exact ns numbers, typed
columns), `read` (typed columns with warnings, then the flavor), `build` (slices, tracks,
counters), `phases` (B/E pairing, flow binding); `deep` guards the nesting depth. Written by
`write` (+ `write_flows`).
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

from moetrace.trace.formats.chrome.read import read_chrome
from moetrace.trace.formats.chrome.write import write_chrome
from moetrace.trace.model import Trace

GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"


def looks_like_json(head: bytes) -> bool:
    """True when `head`, after a BOM and whitespace, starts a JSON object or array."""
    text = head[len(_BOM) :] if head.startswith(_BOM) else head
    return text.lstrip(_WHITESPACE)[:1] in (b"{", b"[")


class ChromeJson:
    """The Chrome JSON format plug-in (see formats.registry.Format)."""

    name = "chrome-json"
    extensions = (".json", ".json.gz")

    def sniff(self, head: bytes) -> bool:
        """gzip magic, or JSON that does not start with 0x0a (a newline first is also the
        protobuf packet tag: then the extension decides, see formats.registry)."""
        return head[:2] == GZIP_MAGIC or (head[:1] != b"\n" and looks_like_json(head))

    def read(self, path: Path, *, flavor: str | None = None) -> Trace:
        return read_chrome(path, flavor=flavor)

    def write(self, trace: Trace, out: Path | IO[bytes], *, force: bool) -> None:
        write_chrome(trace, out, force=force)


CHROME = ChromeJson()
