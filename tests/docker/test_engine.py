"""The Docker SDK adapter (rmptwin.emulation.docker_engine) against a real engine: a container made as
a Docker host is (limits, labels, capabilities, no network, mounts), exec, logs, stats and the
stats sampler, removal of many at once, leftovers found and removed by label, and the image
steps (import, classic build with no network, removal). No Mininet, no network is built."""

from __future__ import annotations

import io
import json
import tarfile
import time
import uuid

import pytest

from rmptwin.emulation import cleanup
from rmptwin.emulation import docker_engine as engine
from rmptwin.emulation.containerstats import ContainerStatsSampler, sample_of
from rmptwin.emulation.dockerhost import CAPABILITIES
from rmptwin.errors import UserError

pytestmark = [pytest.mark.docker, pytest.mark.root]

BUSY = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"


@pytest.fixture
def names(docker_engine):
    """Unique container names for one test; whatever is left of them is removed after it."""
    made: list[str] = []

    def new(prefix: str = "t") -> str:
        made.append(f"rmptwin-test-{prefix}-{uuid.uuid4().hex[:8]}")
        return made[-1]

    yield new
    engine.remove_containers(made)


def _start(name: str, image: str, tmp_path=None, state: str = "", **kw) -> int:
    mounts = [(str(tmp_path), "/mnt/run", "rw")] if tmp_path else []
    return engine.start_container(name, image, kw.pop("command", ["sleep", "infinity"]), hostname="h1",
                                  labels={cleanup.CONTAINER_LABEL: "1", "rmptwin.state": state}, mounts=mounts,
                                  cap_add=list(CAPABILITIES), **kw)


def test_a_container_has_the_limits_labels_and_isolation_a_docker_host_asks_for(local_image, names, tmp_path):
    name = names()
    pid = _start(name, local_image, tmp_path, state=str(tmp_path), cpus=0.5, memory_mb=64,
                 command=["sh", "-c", "echo started; echo to-stderr >&2; exec sleep infinity"])
    assert pid > 0 and engine.container_pid(name) == pid
    info = engine.client().api.inspect_container(name)
    hc = info["HostConfig"]
    assert hc["NanoCpus"] == 500_000_000 and hc["Memory"] == 64 << 20       # --cpus 0.5 --memory 64m
    assert hc["NetworkMode"] == "none" and not hc["Privileged"] and set(hc["CapAdd"]) == set(CAPABILITIES)
    assert info["Config"]["Hostname"] == "h1"
    labels = info["Config"]["Labels"]   # the image's own labels besides
    assert labels[cleanup.CONTAINER_LABEL] == "1" and labels["rmptwin.state"] == str(tmp_path)
    assert f"{tmp_path}:/mnt/run:rw" in hc["Binds"]
    # exec: exit code and output; the rw mount is the host's directory
    code, out = engine.exec_in(name, ["sh", "-c", "echo hi > /mnt/run/x; cat /mnt/run/x; exit 3"])
    assert (code, out) == (3, "hi\n") and (tmp_path / "x").read_text() == "hi\n"
    code, out = engine.exec_in(name, ["ip", "-o", "link"])          # --network none: loopback only
    assert code == 0 and [ln.split(":")[1].strip() for ln in out.splitlines()] == ["lo"]
    deadline = time.monotonic() + 10
    while "to-stderr" not in engine.logs(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    # both streams, each line once: the engine keeps stdout and stderr apart, so their
    # relative order in the merged log is not defined (seen both ways on this machine)
    assert sorted(engine.logs(name).split()) == ["started", "to-stderr"]


def test_stats_show_a_busy_loops_cpu_and_the_sampler_sees_the_limit(local_image, names):
    name = names()
    _start(name, local_image, cpus=0.5, memory_mb=64,
           command=["sh", "-c", f"while true; do {BUSY}; done"])
    time.sleep(0.5)
    first = sample_of(engine.stats_once(name))
    assert first.cpu_ns > 0 and first.mem_bytes > 0
    sampler = ContainerStatsSampler({"n1": name}).start()
    time.sleep(4.5)
    sampler.stop()
    f = sampler.figures()["n1"]
    assert f["samples"] >= 3, f
    assert f["cpu_s"] > 0.2 and 10 < f["cpu_mean_pct"] <= 60, f   # a busy loop, held to half a CPU
    assert f["cpu_max_pct"] <= 70 and f["cpu_throttled_s"] > 0, f
    assert 0 < f["mem_mean_mib"] <= f["mem_max_mib"] < 64, f
    json.dumps(f)                                                   # summary.json takes it as is


def test_the_sampler_ends_quietly_when_a_container_goes_away(local_image, names):
    a, b = names(), names()
    for n in (a, b):
        _start(n, local_image)
    sampler = ContainerStatsSampler({"a": a, "b": b}).start()
    time.sleep(1.5)
    assert engine.remove_containers([b]) == 1
    time.sleep(1.5)
    started = time.monotonic()
    sampler.stop()
    assert time.monotonic() - started < 2.5
    f = sampler.figures()
    assert f["a"]["samples"] >= 2 and f["b"]["samples"] >= 1


def test_many_containers_are_removed_at_once_and_a_missing_one_is_not_counted(local_image, names):
    made = [names() for _ in range(6)]
    for n in made:
        _start(n, local_image)
    started = time.monotonic()
    assert engine.remove_containers(made + ["rmptwin-test-never-made"]) == 6
    took = time.monotonic() - started
    left = {name for _, name, _ in engine.labelled_containers(cleanup.CONTAINER_LABEL)}
    assert not left & set(made), took


def test_leftovers_are_found_by_label_and_removed_by_net_downs_plan(local_image, names, tmp_path):
    dead_state = tmp_path / "dead-owner"            # a network whose owner is gone
    live_state = tmp_path / "live-owner"
    dead = [names("dead") for _ in range(2)]
    live = names("live")
    unlabelled = names("other")
    for n in dead:
        _start(n, local_image, state=str(dead_state))
    _start(live, local_image, state=str(live_state))
    engine.start_container(unlabelled, local_image, ["sleep", "infinity"], hostname="x", labels={"other": "1"})
    found = cleanup._project_containers()
    by_name = {name: (cid, state) for cid, name, state in found}
    assert set(dead) | {live} <= set(by_name) and unlabelled not in by_name
    assert by_name[live][1] == str(live_state) and len(by_name[live][0]) == 12
    alive = cleanup.LiveNetwork(owner_pid=1, tag=None, state_dir=str(live_state))
    plan = cleanup.plan_sweep([alive], [], [c for c in found if c[1] in dead + [live]], [], [])
    assert sorted(plan.containers) == sorted(by_name[n][0] for n in dead)
    assert cleanup._remove_containers(plan.containers) == 2
    left = {name for _, name, _ in cleanup._project_containers()}
    assert not left & set(dead) and live in left


def test_a_state_dirs_recorded_containers_are_removed_by_its_cleanup(local_image, names, tmp_path):
    made = [names("rec") for _ in range(3)]
    for n in made:
        _start(n, local_image, state=str(tmp_path))
    (tmp_path / "net.json").write_text(json.dumps({"containers": made, "switches": []}))
    done = cleanup.cleanup_state_dir(tmp_path)
    assert done["containers"] == 3 and not (tmp_path / "net.json").exists()


def test_a_missing_image_is_one_line_naming_the_build(docker_engine, names):
    with pytest.raises(UserError, match=r"(?i)^starting container .* no such image.*`rmptwin image build`$") as e:
        engine.start_container(names(), "rmptwin-no-such-image:0", ["true"], hostname="x", labels={})
    assert "\n" not in str(e.value)


def _tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_import_build_and_remove_an_image_without_a_registry(docker_engine, tmp_path):
    tag = uuid.uuid4().hex[:8]
    base, built = f"rmptwin-test-base:{tag}", f"rmptwin-test-node:{tag}"
    try:
        (tmp_path / "rootfs.tar").write_bytes(_tar_of({"etc/marker": b"base\n"}))
        base_id = engine.import_image(tmp_path / "rootfs.tar", base)
        assert base_id.startswith("sha256:") and engine.image_id(base) == base_id
        ctx = tmp_path / "ctx"
        ctx.mkdir()
        (ctx / "Dockerfile").write_text("ARG BASE\nFROM ${BASE}\nCOPY extra /etc/extra\n")
        (ctx / "extra").write_text("node\n")
        log = io.BytesIO()
        built_id = engine.build_image(ctx, built, {"BASE": base}, log)
        assert engine.image_id(built) == built_id != base_id and b"COPY extra" in log.getvalue()
        (ctx / "Dockerfile").write_text("ARG BASE\nFROM ${BASE}\nCOPY missing /x\n")
        with pytest.raises(UserError, match=r"^docker build of rmptwin-test-node:\w+ failed: "):
            engine.build_image(ctx, built + "x", {"BASE": base}, io.BytesIO())
    finally:
        engine.remove_images([built, base])
    assert engine.image_id(built) is None and engine.image_id(base) is None


def test_the_node_images_dockerfile_builds_through_the_sdk_on_the_cached_base(local_image, tmp_path):
    from rmptwin.emulation import image

    tag = f"rmptwin-test-node:{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp_path / "build.log", "wb") as log:
            built = engine.build_image(image.build_context(tmp_path), tag, {"BASE": image.base_tag()}, log)
        assert built == engine.image_id(tag)
        # The same definition as the cached node image: the same base layers, one layer on
        # them holding the node's entry point, and the same configuration. The top layer's
        # digest is not compared: COPY stamps the directories it writes into with the build's
        # time, so two builds that miss the build cache (the cached image was loaded from
        # `rmptwin image save`, or built in another checkout) differ there and nowhere else.
        inspect = lambda t: engine.client().api.inspect_image(t)
        ours, cached = inspect(tag), inspect(local_image)
        assert ours["RootFS"]["Layers"][:-1] == cached["RootFS"]["Layers"][:-1]
        assert ours["RootFS"]["Layers"][:-1] == inspect(image.base_tag())["RootFS"]["Layers"]
        for key in ("Entrypoint", "Cmd", "Env", "Labels"):
            assert ours["Config"][key] == cached["Config"][key], key
        assert _file_in(tag, "/usr/local/bin/rmptwin-node") == (
            (image.NODES / "entrypoint.sh").read_bytes(), 0o755)
    finally:
        engine.remove_images([tag])


def _file_in(tag: str, path: str) -> tuple[bytes, int]:
    """One file of an image (its bytes and permission bits), read from a created, never
    started, container."""
    c = engine.client().containers.create(tag)
    try:
        stream, _ = c.get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.getmembers()[0]
            return tar.extractfile(member).read(), member.mode & 0o777
    finally:
        c.remove(force=True)


def test_a_saved_node_image_is_loaded_where_it_cannot_be_built(local_image, tmp_path, monkeypatch):
    """`rmptwin image save` on one machine, `ensure_image` on another (the Vagrant box has no
    Debian mirror): the saved archive brings back the exact image, and nothing is built."""
    from rmptwin.emulation import image

    archive = tmp_path / "node-images.tar"
    before = engine.image_id(local_image)
    assert image.save_image(archive) == local_image
    assert archive.stat().st_size > 10_000_000
    engine.remove_images([local_image])
    assert engine.image_id(local_image) is None

    def no_build(*a, **k):
        raise AssertionError("built instead of loaded")

    monkeypatch.setattr(image, "SAVED_IMAGES", archive)
    monkeypatch.setattr(engine, "build_image", no_build)
    monkeypatch.setattr(image, "build_base", no_build)
    try:
        assert image.ensure_image() == local_image
    finally:
        monkeypatch.undo()
        image.ensure_image()    # never leave the machine without the node image
    assert engine.image_id(local_image) == before
