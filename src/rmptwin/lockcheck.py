"""Does the venv hold exactly what requirements.lock pins?

scripts/provision.sh runs this file directly (``.venv/bin/python src/rmptwin/lockcheck.py
requirements.lock``), before and after installing, so it imports only the standard library
and, for the dependency walk, ``packaging`` (itself locked). tests/unit/test_lock.py checks
the real venv and feeds the checks made-up locks.

The venv sees Debian's site packages (Mininet comes only from Debian), so a package can be
"installed" at the right version and still import from /usr/lib/python3/dist-packages: the
checks therefore look at where each locked package imports from, not only at its version.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import re
import subprocess
import sys
import sysconfig
from collections import defaultdict
from pathlib import Path

ROOT_DISTRIBUTION = "rmptwin"
ROOT_EXTRAS = ("dev",)
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def normalize(name: str) -> str:
    """PEP 503 name: 'PyYAML', 'pyyaml' and 'oslo.config' vs 'oslo-config' compare equal."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(text: str) -> dict[str, tuple[str, str]]:
    """{normalized name: (name as written, version)} for every `name==version` line."""
    pins: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        m = _PIN.match(line.strip())
        if m:
            pins[normalize(m.group(1))] = (m.group(1), m.group(2))
    return pins


def venv_dirs() -> tuple[str, ...]:
    """The venv's own site-packages (pure and platform), where every locked package must be."""
    paths = sysconfig.get_paths()
    return tuple(sorted({str(Path(paths["purelib"]).resolve()), str(Path(paths["platlib"]).resolve())}))


def _inside(path: str | None, dirs: tuple[str, ...]) -> bool:
    resolved = str(Path(path).resolve()) if path else ""
    return any(resolved == d or resolved.startswith(d + "/") for d in dirs)


def version_problems(pins: dict[str, tuple[str, str]]) -> list[str]:
    """One phrase per locked distribution that is missing or at another version."""
    problems = []
    for name, version in pins.values():
        try:
            installed = md.version(name)
        except md.PackageNotFoundError:
            problems.append(f"{name} is not installed (the lock pins {version})")
            continue
        if installed != version:
            problems.append(f"{name} is {installed} in the venv but the lock pins {version}")
    return problems


def _top_level_modules() -> dict[str, set[str]]:
    """{normalized distribution name: its top-level import names}, over every visible dist."""
    modules: dict[str, set[str]] = defaultdict(set)
    for module, dists in md.packages_distributions().items():
        for dist in dists:
            modules[normalize(dist)].add(module)
    return modules


def location_problems(pins: dict[str, tuple[str, str]], dirs: tuple[str, ...] | None = None) -> list[str]:
    """One phrase per locked distribution whose metadata or modules resolve outside the venv."""
    dirs = dirs or venv_dirs()
    modules = _top_level_modules()
    problems = []
    for key, (name, _version) in pins.items():
        try:
            site_dir = str(md.distribution(name).locate_file(""))
        except md.PackageNotFoundError:
            continue  # version_problems says so
        if not _inside(site_dir, dirs):
            problems.append(f"{name} is installed in {site_dir}, not in the venv")
            continue
        for module in sorted(modules.get(key, ())):
            spec = importlib.util.find_spec(module) if module.isidentifier() else None
            origin = spec.origin if spec else None
            if origin and origin not in ("built-in", "frozen") and not _inside(origin, dirs):
                problems.append(f"`import {module}` ({name}) resolves to {origin}, not the venv")
    return problems


def _requirements(dist_name: str, extras: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """(name, extras) of what ``dist_name`` installed with ``extras`` requires on this machine."""
    from packaging.requirements import Requirement

    wanted = []
    for spec in md.requires(dist_name) or ():
        req = Requirement(spec)
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            continue
        wanted.append((req.name, tuple(sorted(req.extras))))
    return wanted


def dependency_closure(root: str = ROOT_DISTRIBUTION, extras: tuple[str, ...] = ROOT_EXTRAS) -> dict[str, str]:
    """{normalized name: name} of every distribution ``root[extras]`` needs, transitively.

    A requirement that is not installed at all is included too: it is as unlocked as one
    that came from elsewhere.
    """
    seen: dict[str, str] = {}
    todo = [(root, extras)]
    expanded: set[tuple[str, tuple[str, ...]]] = set()
    while todo:
        name, want = todo.pop()
        if (normalize(name), want) in expanded:
            continue
        expanded.add((normalize(name), want))
        try:
            reqs = _requirements(name, want)
        except md.PackageNotFoundError:
            continue
        for dep, dep_extras in reqs:
            seen.setdefault(normalize(dep), dep)
            todo.append((dep, dep_extras))
    seen.pop(normalize(root), None)
    return seen


def unlocked_problems(pins: dict[str, tuple[str, str]], needed: dict[str, str] | None = None) -> list[str]:
    """One phrase per dependency of the project that requirements.lock does not pin."""
    if needed is None:
        try:
            md.distribution(ROOT_DISTRIBUTION)
        except md.PackageNotFoundError:
            return [f"{ROOT_DISTRIBUTION} itself is not installed in the venv"]
        needed = dependency_closure()
    return [f"{name} is a dependency of {ROOT_DISTRIBUTION} but not in requirements.lock"
            for key, name in sorted(needed.items()) if key not in pins]


def pip_check_problems(pins: dict[str, tuple[str, str]], output: str | None = None) -> list[str]:
    """`pip check` lines about rmptwin or a locked package.

    Debian's own site packages are visible in the venv and some of them have requirements
    Debian never installed (python3-gi names pycairo): those lines are not ours to fix.
    """
    if output is None:
        output = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True,
                                text=True, check=False).stdout
    ours = set(pins) | {ROOT_DISTRIBUTION}
    return [f"pip check: {line.strip()}" for line in output.splitlines()
            if line.split() and normalize(line.split()[0]) in ours]


def problems(lock_text: str, with_pip_check: bool = False) -> list[str]:
    pins = read_lock(lock_text)
    if not pins:
        return ["requirements.lock pins nothing"]
    found = version_problems(pins) + location_problems(pins)
    try:
        found += unlocked_problems(pins)
    except ImportError:
        found.append("packaging is not importable, so the dependency walk cannot run")
    if with_pip_check:
        found += pip_check_problems(pins)
    return found


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    lock = Path(args[0] if args else "requirements.lock")
    try:
        text = lock.read_text()
    except OSError as e:
        print(f"rmptwin: cannot read {lock}: {e.strerror}", file=sys.stderr)
        return 2
    found = problems(text, with_pip_check="--pip-check" in argv)
    if found:
        print(f"rmptwin: the venv does not match {lock}: " + "; ".join(found), file=sys.stderr)
        return 1
    if "--quiet" not in argv:
        print(f"{len(read_lock(text))} packages as {lock} pins them, all imported from the venv")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
