"""The Docker engine through the Docker SDK for Python (``docker``): the one module that talks to it.

Containers (created with their limits, exec, logs, stats, removal, the project's leftovers
found by label) and images (inspect, remove, import, build) are API calls here, never
parsed CLI output. An engine error leaves as one ``UserError`` line saying what to fix:
an engine that does not answer names the socket and why (no socket, nothing listening).

No docker CLI call remains. The image build keeps two command lines that are not the
engine's: ``debootstrap`` makes the base image's root filesystem and ``tar`` packs it
(``image``). ``docker import`` is ``import_image`` of that tar file, and ``docker build``
with ``DOCKER_BUILDKIT=0`` is the SDK's ``build``, which always uses the engine's classic
builder: the SDK has no BuildKit, and the node image's Dockerfile needs none (it copies
files; ``--network none`` is the classic builder's ``network_mode``).

``docker`` is imported inside the functions: the command line pays its 0.2 s only when it
uses the engine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rmptwin.errors import UserError

if TYPE_CHECKING:
    from docker import DockerClient  # untyped (no stubs locked): Any to mypy

TIMEOUT_S = 60.0        # per API call (``docker rm -f`` of a busy container fits)
LOAD_TIMEOUT_S = 1800.0  # one `docker load` of a saved image: seconds here, minutes under an emulated CPU
PING_TIMEOUT_S = 5.0    # "is the engine up?" must not hang a status line
DEFAULT_HOST = "unix:///var/run/docker.sock"
REMOVE_THREADS = 8      # removals at once (the SDK's connection pool keeps 10)
DOCKERD_LOG = Path("/var/log/rmptwin-dockerd.log")   # where a dockerd that rmptwin started writes (env)

_clients: dict[str, DockerClient] = {}
# container name -> the base URL of the engine it runs in, where that is not ``host()``: a
# server's engine (``emulation.server_engines``) for the Docker hosts of a run over servers
_engine_of: dict[str, str] = {}


def host() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_HOST


def _os_error(e: BaseException) -> OSError | None:
    """The socket error under a requests/urllib3 chain (FileNotFoundError: no socket; refused: no listener)."""
    seen = set()
    stack: list[BaseException | None] = [e]
    while stack:
        x = stack.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, OSError) and x.errno is not None:
            return x
        stack += [x.__cause__, x.__context__, *(a for a in getattr(x, "args", ()) if isinstance(a, BaseException))]
    return None


def unreachable(e: BaseException) -> UserError:
    os_err = _os_error(e)
    why = (f"{os_err.strerror.lower()}" if os_err is not None and os_err.strerror else
           str(e).splitlines()[0] if str(e) else type(e).__name__)
    return UserError(f"dockerd is not running (no Docker engine answers at {host()}: {why}); "
                     "run as root so that rmptwin starts it, or use --nodes ns")


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0] if lines else ""


@contextmanager
def engine_call(what: str) -> Iterator[None]:
    """Turn the SDK's errors inside the block into one ``UserError`` line about ``what``."""
    import docker.errors
    import requests.exceptions

    try:
        yield
    except docker.errors.ImageNotFound as e:
        raise UserError(f"{what}: {_first_line(e.explanation or e)}; build the node image with "
                        "`rmptwin image build`") from None
    except docker.errors.NotFound as e:
        raise UserError(f"{what}: {_first_line(e.explanation or e)}") from None
    except docker.errors.APIError as e:
        raise UserError(f"{what} failed: {_first_line(e.explanation or e)}") from None
    except requests.exceptions.Timeout:
        raise UserError(f"{what}: the Docker engine at {host()} did not answer within {TIMEOUT_S:.0f} s; "
                        f"is dockerd overloaded or stuck? (see {DOCKERD_LOG})") from None
    except (requests.exceptions.ConnectionError, docker.errors.DockerException) as e:
        if isinstance(e, requests.exceptions.ConnectionError) or _os_error(e) is not None:
            raise unreachable(e) from None
        raise UserError(f"{what} failed: {_first_line(str(e))}") from None


def _connect(timeout: float, pool: int | None = None, base_url: str | None = None) -> DockerClient:
    import docker

    kw = {"max_pool_size": pool} if pool else {}
    with engine_call(f"connecting to the Docker engine{f' at {base_url}' if base_url else ''}"):
        if base_url:
            return docker.DockerClient(base_url=base_url, timeout=timeout, **kw)
        return docker.from_env(timeout=timeout, **kw)


def client(base_url: str | None = None) -> DockerClient:
    """The process's client of the engine at ``base_url``, by default the one ``DOCKER_HOST``
    names (a new one if it changed)."""
    key = base_url or host()
    if key not in _clients:
        _clients[key] = _connect(TIMEOUT_S, base_url=base_url)
    return _clients[key]


def engine_of(container: str) -> str | None:
    """The base URL of the engine ``container`` was started in by ``start_container``; None: ``host()``'s."""
    return _engine_of.get(container)


def forget_engine(base_url: str) -> None:
    """Drop the client of an engine that is going away (a server's forwarded socket being closed)
    and what was known about its containers."""
    c = _clients.pop(base_url, None)
    if c is not None:
        c.close()
    for name in [n for n, url in _engine_of.items() if url == base_url]:
        del _engine_of[name]


def stats_client(containers: int, base_url: str | None = None) -> DockerClient:
    """A client of its own for ``containers`` stats streams at once (each holds a connection)."""
    return _connect(TIMEOUT_S, pool=containers + 2, base_url=base_url)


def running(base_url: str | None = None) -> bool:
    """Does the engine (default ``host()``'s) answer within ``PING_TIMEOUT_S``? Never raises."""
    try:
        c = _connect(PING_TIMEOUT_S, base_url=base_url)
    except UserError:
        return False
    try:
        return bool(c.ping())
    except Exception:
        return False
    finally:
        c.close()


# ----------------------------------------------------------------------------- containers


def start_container(name: str, image: str, command: list[str], *, hostname: str, labels: dict[str, str],
                    mounts: Sequence[tuple[str, str, str]] = (), cap_add: Sequence[str] = (), network: str = "none",
                    cpus: float | None = None, memory_mb: int | None = None, engine: str | None = None) -> int:
    """Create and start a detached container (``docker run -d``) in the engine at ``engine``
    (default ``host()``'s); returns its init's pid, as that engine's machine numbers it.
    ``mounts`` are (source, target, mode) as ``-v source:target:mode``; ``cpus`` is ``--cpus``
    (NanoCpus), ``memory_mb`` is ``--memory <n>m`` (swap left to the engine's default, as the CLI does)."""
    kw: dict[str, Any] = {}
    if cpus:
        kw["nano_cpus"] = int(round(float(cpus) * 1e9))
    if memory_mb:
        kw["mem_limit"] = f"{int(memory_mb)}m"
    with engine_call(f"starting container {name} from {image}"):
        if engine:
            _engine_of[name] = engine
        c = client(engine).containers.create(image, command, name=name, hostname=hostname, labels=labels,
                                       network_mode=network, cap_add=list(cap_add),
                                       volumes=[f"{s}:{d}:{m}" for s, d, m in mounts], detach=True, **kw)
        c.start()
        c.reload()
        return int(c.attrs["State"]["Pid"] or 0)


def container_pid(name: str) -> int:
    with engine_call(f"inspecting container {name}"):
        return int(client(engine_of(name)).api.inspect_container(name)["State"]["Pid"] or 0)


def exec_in(name: str, command: list[str]) -> tuple[int, str]:
    """``docker exec``: the exit code and the output (stdout and stderr together)."""
    with engine_call(f"exec in container {name}"):
        r = client(engine_of(name)).containers.get(name).exec_run(command)
    return r.exit_code, r.output.decode(errors="replace")


def logs(name: str) -> str:
    with engine_call(f"reading the logs of container {name}"):
        text: str = client(engine_of(name)).api.logs(name, stdout=True, stderr=True).decode(errors="replace")
        return text


def stats_once(name: str) -> dict[str, Any]:
    """One stats record of a running container (``one_shot``: no second sample awaited)."""
    with engine_call(f"reading the stats of container {name}"):
        record: dict[str, Any] = client(engine_of(name)).api.stats(name, stream=False, one_shot=True)
        return record


def stream_stats(cl: DockerClient, name: str) -> Iterator[dict[str, Any]]:
    """The engine's stats records of one container, one a second, until it stops; SDK errors
    pass through (a sampler thread ends on them)."""
    yield from cl.api.stats(name, stream=True, decode=True)


def remove_containers(names: list[str], engine: str | None = None) -> int:
    """``docker rm -f`` of all ``names`` at once (concurrently, as the CLI does), each in the
    engine it was started in (else ``engine``'s, else ``host()``'s); returns how many were
    removed. Never raises: it runs in teardown and cleanup, which go on regardless."""
    if not names:
        return 0
    apis: dict[str | None, Any] = {}
    for url in {engine_of(n) or engine for n in names}:
        try:
            apis[url] = client(url).api
        except UserError:
            pass

    def remove(n: str) -> bool:
        api = apis.get(engine_of(n) or engine)
        if api is None:   # its engine does not answer
            return False
        try:
            api.remove_container(n, force=True)
            return True
        except Exception:
            return False

    with ThreadPoolExecutor(max_workers=min(REMOVE_THREADS, len(names))) as pool:
        return sum(pool.map(remove, names))


def labelled_containers(label: str, engine: str | None = None) -> list[tuple[str, str, dict[str, str]]]:
    """(short id, name, labels) of every container, running or not, carrying ``label`` in the
    engine at ``engine`` (default ``host()``'s); none when no engine answers (nothing of ours
    can be left in an engine that is not running)."""
    if not running(engine):
        return []
    with engine_call(f"listing containers labelled {label}"):
        rows = client(engine).api.containers(all=True, filters={"label": label})
    return [(r["Id"][:12], (r.get("Names") or ["/"])[0].lstrip("/"), r.get("Labels") or {}) for r in rows]


# ----------------------------------------------------------------------------- images


def image_exists(tag: str) -> bool:
    return image_id(tag) is not None


def image_id(tag: str | None, engine: str | None = None) -> str | None:
    """The image's content id (sha256:...) in the engine at ``engine`` (default ``host()``'s),
    None when there is no such image (or no engine)."""
    if not tag:
        return None
    try:
        with engine_call(f"inspecting image {tag}"):
            image: str = client(engine).api.inspect_image(tag)["Id"]
            return image
    except UserError:   # no such image, or no engine
        return None


def remove_images(tags: list[str]) -> None:
    """``docker rmi -f``, best effort as before: a missing or still-used image stays, and the
    build that follows re-tags it."""
    for tag in tags:
        try:
            with engine_call(f"removing image {tag}"):
                client().api.remove_image(tag, force=True)
        except UserError:
            pass


def import_image(tar: Path, tag: str) -> str:
    """``docker import <tar> <tag>``; returns the image id."""
    repo, _, version = tag.rpartition(":")
    with engine_call(f"importing {tar} as {tag}"):
        client().api.import_image_from_file(str(tar), repository=repo, tag=version)
        image: str = client().api.inspect_image(tag)["Id"]
        return image


def save_image(tag: str, tar: Path) -> None:
    """``docker save tag -o tar``: the image with every layer below it, for a machine that cannot build it."""
    with engine_call(f"saving {tag} to {tar}"), open(tar, "wb") as f:
        for chunk in client().api.get_image(tag):
            f.write(chunk)


def load_images(tar: Path) -> None:
    """``docker load -i tar``, on a client of its own that waits as long as a load takes: the
    engine answers only when every layer is in (over 60 s for the node image in a VM under TCG,
    beyond the usual request timeout)."""
    with engine_call(f"loading images from {tar}"), open(tar, "rb") as f:
        _connect(LOAD_TIMEOUT_S).api.load_image(f)


def build_image(context: Path, tag: str, buildargs: dict[str, str], log: IO[bytes]) -> str:
    """``docker build --network none --build-arg ... -t tag context`` with the classic builder;
    the engine's output goes to ``log``. Returns the image id."""
    with engine_call(f"docker build of {tag}"):
        for chunk in client().api.build(path=str(context), tag=tag, buildargs=buildargs, network_mode="none",
                                        rm=True, decode=True):
            text = chunk.get("stream") or chunk.get("status") or ""
            if text:
                log.write(text.encode())
            if "error" in chunk:
                log.write(f"{chunk['error']}\n".encode())
                raise UserError(f"docker build of {tag} failed: {_first_line(chunk['error'])}")
        log.flush()
        image: str = client().api.inspect_image(tag)["Id"]
        return image
