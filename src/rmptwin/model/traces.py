"""Loss traces (``loss: {model: trace, file: F}``): reading the file into the spec.

The loader calls ``fill_traces`` on the YAML data before validation, so the model holds the
trace itself (``packets`` or ``intervals_ms``): the link model stays pure (it is given the
sequence, never a path), and a run's manifest carries the trace, so ``rmptwin rerun`` and the
emulation's relays need no file.

Two formats, told apart by their lines (``#`` starts a comment; blank lines are skipped):

- per packet: ``0`` (delivered) or ``1`` (lost) for each packet offered to the link, one per
  line or run together (``0001100...``), in the order the link is offered packets;
- loss intervals: ``start_ms end_ms`` per line, in ms of run time: every packet offered
  in ``[start, end)`` is lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmptwin.errors import UserError


def read_trace(path: Path) -> dict[str, Any]:
    """``{"packets": "0101..."}`` or ``{"intervals_ms": [[a, b], ...]}`` from a trace file."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such trace file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read the trace ({getattr(e, 'strerror', None) or e})") from None
    return parse_trace(text, str(path))


def parse_trace(text: str, where: str = "trace") -> dict[str, Any]:
    rows = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if line:
            rows.append((n, line))
    if not rows:
        raise UserError(f"{where}: empty trace (expected 0/1 per packet or 'start_ms end_ms' per line)")
    if all(len(line.split()) == 2 for _, line in rows) and not all(set(line) <= set("01 \t") for _, line in rows):
        intervals = []
        for n, line in rows:
            try:
                a, b = (float(x) for x in line.split())
            except ValueError:
                raise UserError(f"{where}:{n}: expected 'start_ms end_ms', got {line!r}") from None
            if not 0 <= a < b:
                raise UserError(f"{where}:{n}: an interval needs 0 <= start < end, got {line!r}")
            intervals.append([a, b])
        return {"intervals_ms": sorted(intervals)}
    bits = []
    for n, line in rows:
        chunk = "".join(line.split())
        if set(chunk) - {"0", "1"}:
            raise UserError(f"{where}:{n}: expected 0/1 per packet (or 'start_ms end_ms' intervals), got {line!r}")
        bits.append(chunk)
    return {"packets": "".join(bits)}


def _fill(loss: Any, base: Path, where: str) -> None:
    if isinstance(loss, dict) and loss.get("model") == "trace" and loss.get("file") \
            and loss.get("packets") is None and loss.get("intervals_ms") is None:
        f = Path(str(loss["file"]))
        loss.update(read_trace(f if f.is_absolute() else base / f))


def fill_traces(data: dict[str, Any], path: Path) -> None:
    """Read every trace file a topology or experiment YAML names (links, hosts' access links,
    faults), relative to the YAML, into its loss mapping. Malformed shapes are left for the
    model's validation to report."""
    base = path.parent
    for i, link in enumerate(data.get("links") or []):
        if isinstance(link, dict):
            _fill(link.get("loss"), base, f"{path}: links.{i}.loss")
    for i, host in enumerate(data.get("hosts") or []):
        if isinstance(host, dict) and isinstance(host.get("link"), dict):
            _fill(host["link"].get("loss"), base, f"{path}: hosts.{i}.link.loss")
    for i, fault in enumerate(data.get("faults") or []):
        if isinstance(fault, dict):
            _fill(fault.get("loss"), base, f"{path}: faults.{i}.loss")
