"""The documentation site builds, and what it generates is complete: `mkdocs build --strict`
passes on docs/ (a broken link, a missing anchor or an unknown generated-part marker fails
it), the command-line reference has every command and option of the typer app, the YAML
reference every field of both JSON Schemas, the benchmark page every reference figure, and
the README's links and commands point at pages and commands that exist."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "scripts" / "docs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _hooks()


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[dev]'): the site is not built")
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install -e '.[dev]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, env=env, timeout=300)


def test_the_site_builds_with_no_warning(tmp_path):
    out = _mkdocs_build(REPO / "mkdocs.yml", tmp_path / "site")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "WARNING" not in out.stderr, out.stderr[-3000:]
    for page in ("cli", "experiments", "benchmarks", "architecture"):
        assert (tmp_path / "site" / page / "index.html").exists()
    # the notebooks (notebooks/, outside docs/) are pages, their markdown rendered, the .ipynb beside
    notebooks = sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 3
    for name in notebooks:
        page = tmp_path / "site" / "notebooks" / name
        assert (page / f"{name}.ipynb").exists() and "jupyter-wrapper" in (page / "index.html").read_text()
    # the generated parts are in the pages, not their markers
    cli = (tmp_path / "site" / "cli" / "index.html").read_text()
    assert "rmptwin-docs:" not in cli and 'id="rmptwin-net-selftest"' in cli


def test_a_broken_link_fails_the_build(tmp_path):
    """The check can fail: a copy of the docs with one link to a page that does not exist."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "docs", copy / "docs")
    (copy / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "docs_hooks.py", copy / "scripts")
    shutil.copy(REPO / "mkdocs.yml", copy)
    shutil.copytree(REPO / "notebooks", copy / "notebooks", ignore=shutil.ignore_patterns("data"))
    tour = copy / "docs" / "tour.md"
    tour.write_text(tour.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    out = _mkdocs_build(copy / "mkdocs.yml", tmp_path / "site")
    assert out.returncode != 0
    assert "no-such-page.md" in out.stderr


def test_the_command_line_reference_has_every_command_and_option():
    from rmptwin.cli.main import app

    text = hooks.cli_reference(app)
    pairs = hooks.commands(app)
    assert len(pairs) > 20
    for cmd, ctx in pairs:
        assert f"# `{ctx.command_path}`" in text
        for p in cmd.get_params(ctx):
            if p.param_type_name == "option" and p.name != "help":
                assert f"`{p.opts[0]}" in text.split(f"# `{ctx.command_path}`", 1)[1], (ctx.command_path, p.opts)
    assert "`rmptwin net down`" in text and "--all" in text


@pytest.mark.parametrize("kind", ["experiment", "topology"])
def test_the_yaml_reference_has_every_field_and_every_link_lands(kind):
    from rmptwin.model import json_schemas

    schema = json_schemas()[kind]
    text = hooks.schema_reference(schema, kind)
    models = [schema, *schema["$defs"].values()]
    for model in models:
        for field in model.get("properties", {}):
            assert f"| `{field}` |" in text, field
    anchors = set(re.findall(r"\{#([\w-]+)\}", text))
    links = set(re.findall(r"\]\(#([\w-]+)\)", text))
    assert links and links <= anchors


def test_the_benchmark_page_has_every_reference_figure():
    import json

    reference = json.loads((REPO / "bench" / "reference.json").read_text())
    text = hooks.bench_reference(reference)
    for mode, doc in reference["modes"].items():
        assert f"The {mode} reference run" in text
        for row in doc["rows"]:
            assert hooks._cell(row["metric"].strip()) in text, row["metric"]


def test_an_unknown_marker_is_an_error():
    with pytest.raises(ValueError, match="rmptwin-docs: nonsense"):
        hooks.expand("text\n<!-- rmptwin-docs: nonsense -->\n")


def test_the_readme_links_to_pages_that_exist_and_shows_commands_that_exist():
    from rmptwin.cli.main import app

    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert targets, "the README links to the docs pages"
    assert [t for t in targets if not (REPO / t).exists()] == []
    paths = {ctx.command_path for _, ctx in hooks.commands(app)}
    shown = re.findall(r"(?:bin/|`)rmptwin ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", readme)
    assert shown, "the README shows rmptwin commands"
    for first, second in shown:
        command = f"rmptwin {first}"
        assert command in paths, command
        if f"{command} {second}" not in paths:
            # a word after a command that has no subcommands is an argument, never a wrong subcommand
            assert not any(p.startswith(command + " ") for p in paths), f"{command} {second}"
