"""Key files of secure experiments (seed 6, 7.1): generating, finding and reading them
(``rmptwin keys gen`` is ``cli.keys_commands``).

A key file is JSON (``KeySet.to_json_dict``: base64 keys), mode 0600, kept OUTSIDE the run
directory so results can be shared without the keys: by default
``$XDG_CONFIG_HOME/rmptwin/keys/<experiment name>.json`` (``~/.config/...`` when
XDG_CONFIG_HOME is unset), or the experiment's ``security.keys`` (relative to the
experiment file). A key file under a ``results/`` directory is refused. Nothing here
prints, logs or records a key; a ``KeySet``'s repr shows key names only.

What a key set holds for an experiment: one key per source host (shared with the R_T), a
remulticast key and a retransmit key per region named by any host, and the ring control
key. ``factories.rmp`` hands each core the part its role is entitled to.
"""

from __future__ import annotations

import json
import os
import secrets
from functools import lru_cache
from pathlib import Path

from rmptwin.errors import UserError
from rmptwin.model import LoadedExperiment
from rmptwin.rmp.seal import KEY_BYTES, KeySet


def default_key_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rmptwin" / "keys"


def key_path(loaded: LoadedExperiment) -> Path:
    """Where the experiment's key file is (it may not exist yet)."""
    given = loaded.experiment.security.keys
    if given:
        p = Path(given).expanduser()
        return p if p.is_absolute() else (loaded.path.parent / p).resolve()
    return default_key_dir() / f"{loaded.experiment.name}.json"


def _check_outside_results(path: Path) -> None:
    if "results" in path.resolve().parts:
        raise UserError(f"key file {path} is under a results/ directory; keep keys out of run directories "
                        f"(security.keys, or the default {default_key_dir()})")


def generate(loaded: LoadedExperiment) -> KeySet:
    """Fresh random keys for every source host and region of the experiment's topology."""
    topo = loaded.topology
    sources = [h.name for h in topo.hosts_with_role("source")]
    regions = sorted(set(topo.regions) | {r for h in topo.hosts for r in getattr(h, "regions", []) or []})
    return KeySet(sources={s: secrets.token_bytes(KEY_BYTES) for s in sources},
                  regions={r: secrets.token_bytes(KEY_BYTES) for r in regions},
                  retransmit={r: secrets.token_bytes(KEY_BYTES) for r in regions},
                  control=secrets.token_bytes(KEY_BYTES))


def write_keys(keys: KeySet, path: Path) -> Path:
    """Write ``keys`` to ``path``, created with mode 0600 (never readable by others, even briefly)."""
    _check_outside_results(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(keys.to_json_dict(), f, indent=1)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


@lru_cache(maxsize=16)
def _read(path: str, mtime_ns: int) -> KeySet:
    try:
        return KeySet.from_json_dict(json.loads(Path(path).read_text()))
    except (ValueError, OSError) as e:
        raise UserError(f"key file {path} is unreadable ({e}); regenerate it with `rmptwin keys gen`") from None


def load_keys(loaded: LoadedExperiment) -> KeySet | None:
    """The experiment's key set; None when security is off. UserError (one line) when the
    experiment asks for security and its key file is missing or lacks a source's key."""
    if not loaded.experiment.security.enabled:
        return None
    path = key_path(loaded)
    _check_outside_results(path)
    if not path.is_file():
        raise UserError(f"experiment '{loaded.experiment.name}' has security enabled but no key file at {path}; "
                        f"run `rmptwin keys gen {loaded.path}` first")
    keys = _read(str(path), path.stat().st_mtime_ns)
    missing = [h.name for h in loaded.topology.hosts_with_role("source") if h.name not in keys.sources]
    if missing:
        raise UserError(f"key file {path} has no key for source {missing[0]}; regenerate it with "
                        f"`rmptwin keys gen {loaded.path} --force`")
    return keys
