"""MkDocs hooks (mkdocs.yml `hooks:`): the reference pages, generated from the code at build time.

A page asks for a generated part with a marker on a line of its own, an HTML comment that a
code host shows as nothing:

    <!-- rmptwin-docs: cli -->                 every command and option of `rmptwin` (the typer app)
    <!-- rmptwin-docs: schema experiment -->   every field of an experiment YAML (its JSON Schema)
    <!-- rmptwin-docs: schema topology -->     every field of a topology YAML
    <!-- rmptwin-docs: bench -->               bench/reference.json as tables

The notebooks (notebooks/*.ipynb, outside docs/) join the site as pages too: ``on_files``.

Generated at each build from this checkout's code (its src/ goes first on the path), so the
site cannot drift from the command line, the models or the reference figures. An unknown
marker fails the build. The functions below are plain (no MkDocs), for tests/unit/test_docs.py.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "src") not in sys.path:     # document this checkout, not whatever rmptwin is installed
    sys.path.insert(0, str(REPO / "src"))

MARKER = re.compile(r"^<!-- rmptwin-docs: ([a-z]+)(?: ([a-z]+))? -->$", re.MULTILINE)


CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")


def _text(s: str | None) -> str:
    """Help or schema text as Markdown that shows it literally: `<run-id>` is not an HTML tag and
    `topologies/*.yaml` starts no emphasis; code spans are left as they are."""
    parts = CODE_SPAN.split(s or "")
    return "".join(part if i % 2 else part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                   .replace("*", "\\*") for i, part in enumerate(parts))


def _cell(s: str | None) -> str:
    return _text(s).replace("|", "\\|").replace("\n", " ")


# ---------------------------------------------------------------- the command line

def _usage(cmd, ctx) -> str:
    parts = [ctx.command_path, "[OPTIONS]"]
    for p in cmd.get_params(ctx):
        if p.param_type_name != "argument":
            continue
        name = (getattr(p, "metavar", None) or p.name).upper()
        name += "..." if p.nargs == -1 else ""
        parts.append(name if p.required else f"[{name}]")
    if hasattr(cmd, "list_commands"):
        parts.append("COMMAND [ARGS]...")
    return " ".join(parts)


def _help_text(cmd) -> str:
    text = (cmd.help or "").replace("\b\n", "")
    return "\n\n".join(" ".join(line.strip() for line in para.splitlines()) for para in text.split("\n\n")).strip()


def commands(app) -> list[tuple[object, object]]:
    """(command, context) of the app's root and every command under it, depth first, in the
    order `--help` lists them; hidden ones left out."""
    import typer.main

    root = typer.main.get_command(app)
    context = root.context_class
    found = []

    def walk(cmd, ctx):
        found.append((cmd, ctx))
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not getattr(sub, "hidden", False):
                    walk(sub, context(sub, info_name=name, parent=ctx))

    walk(root, context(root, info_name="rmptwin"))
    return found


def cli_reference(app) -> str:
    out = []
    for cmd, ctx in commands(app):
        depth = ctx.command_path.count(" ")
        out.append(f"{'#' * (2 + max(depth, 1))} `{ctx.command_path}`\n")   # under the page's "Reference"
        out.append(f"```\n{_usage(cmd, ctx)}\n```\n")
        if _help_text(cmd):
            out.append(_text(_help_text(cmd)) + "\n")
        params = []
        for p in cmd.get_params(ctx):
            if getattr(p, "hidden", False) or p.name == "help":
                continue
            record = p.get_help_record(ctx)
            opts, help_ = (record if record else (p.name, ""))
            if p.param_type_name == "argument":
                opts = opts.split(" ", 1)[0].upper() + (" " + opts.split(" ", 1)[1] if " " in opts else "")
            params.append(f"- `{opts}`" + (f": {_text(' '.join(help_.split()))}" if help_.strip() else ""))
        if params:
            out.append("\n".join(params) + "\n")
        if hasattr(cmd, "list_commands"):
            subs = [n for n in cmd.list_commands(ctx)
                    if not getattr(cmd.get_command(ctx, n), "hidden", False)]
            out.append("Commands: " + ", ".join(f"`{n}`" for n in subs) + ".\n")
    return "\n".join(out)


# ---------------------------------------------------------------- the YAML files

def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _anchor(kind: str, name: str) -> str:
    return f"{kind}-{name.lower()}"


def _type(node: dict, kind: str) -> str:
    """A schema node as a short type: `number ≥ 0`, `list of [LinkSpec](#...)`, `a or b`."""
    if "$ref" in node:
        name = _ref_name(node["$ref"])
        return f"[{name}](#{_anchor(kind, name)})"
    if "const" in node:
        return f"`{node['const']}`"
    if "enum" in node:
        return " or ".join(f"`{v}`" for v in node["enum"])
    for key in ("anyOf", "oneOf"):
        if key in node:
            types = [_type(n, kind) for n in node[key] if n.get("type") != "null"]
            nullable = any(n.get("type") == "null" for n in node[key])
            return " or ".join(types) + (" or null" if nullable else "")
    t = node.get("type")
    if t == "array":
        return "list of " + _type(node.get("items", {}), kind)
    if t == "object" and isinstance(node.get("additionalProperties"), dict):
        return "map of name to " + _type(node["additionalProperties"], kind)
    bounds = [f"{sym} {node[k]}" for k, sym in (("minimum", "≥"), ("exclusiveMinimum", ">"),
                                                  ("maximum", "≤"), ("exclusiveMaximum", "<")) if k in node]
    if "pattern" in node:
        bounds.append(f"matching `{node['pattern']}`")
    if "minItems" in node:
        bounds.append(f"at least {node['minItems']}")
    return " ".join([t or "any"] + bounds)


def _fields(model: dict, kind: str) -> str:
    required = set(model.get("required", []))
    rows = ["| field | type | default | what it is |", "|---|---|---|---|"]
    for name, node in model.get("properties", {}).items():
        default = "required" if name in required else (f"`{node['default']}`" if "default" in node else "")
        if default == "`None`" or node.get("default", 0) is None:
            default = "`null`"
        type_ = _type(node, kind).replace("|", "\\|")
        rows.append(f"| `{name}` | {type_} | {_cell(default)} | {_cell(node.get('description', ''))} |")
    return "\n".join(rows)


def schema_reference(schema: dict, kind: str) -> str:
    """A JSON Schema (as `rmptwin schema KIND` prints it) as Markdown: the file's own fields, then
    each model it refers to, linked from the type column."""
    out = [f"#### The {kind} file {{#{kind}-file}}\n"]
    if schema.get("description"):
        out.append(_text(schema["description"]) + "\n")
    out.append(_fields(schema, kind) + "\n")
    for name, model in sorted(schema.get("$defs", {}).items()):
        out.append(f"#### {name} {{#{_anchor(kind, name)}}}\n")
        if model.get("description"):
            out.append(_text(" ".join(model["description"].split())) + "\n")
        if "properties" in model:
            out.append(_fields(model, kind) + "\n")
        else:
            out.append(f"Type: {_type(model, kind)}\n")
    return "\n".join(out)


# ---------------------------------------------------------------- the benchmarks

def _number(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def bench_reference(reference: dict) -> str:
    """bench/reference.json as one table per mode (full first): each figure with its range,
    runs, unit, direction and the conditions it was measured under."""
    out = []
    modes = reference.get("modes", {})
    for mode in sorted(modes, key=lambda m: m != "full"):
        doc = modes[mode]
        out.append(f"### The {mode} reference run\n")
        out.append(f"- run: {doc.get('run', '?')}, git commit `{doc.get('git_commit', '?')}`")
        out.append(f"- machine: {doc.get('machine', '?')}, load average {doc.get('load_average_1min', '?')} "
                   "(1 min) at the end")
        for bench, why in sorted(doc.get("absent", {}).items()):
            out.append(f"- `{bench}` {_text(why)}")
        out.append("")
        out.append("| bench | what | median | min – max | n | unit | better | conditions |")
        out.append("|---|---|---|---|---|---|---|---|")
        for r in doc.get("rows", []):
            spread = "" if r.get("min") is None else f"{_number(r['min'])} – {_number(r['max'])}"
            out.append(f"| `{r.get('bench', '')}` | {_cell(r.get('metric', '').strip())} | {_number(r.get('value'))} "
                       f"| {spread} | {_number(r.get('n'))} | {_cell(r.get('unit', ''))} | {r.get('better', '')} "
                       f"| {_cell(r.get('conditions', ''))} |")
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------- MkDocs

def generated(name: str, arg: str | None, repo: Path = REPO) -> str:
    if name == "cli" and arg is None:
        from rmptwin.cli.main import app
        return cli_reference(app)
    if name == "schema" and arg in ("experiment", "topology"):
        from rmptwin.model import json_schemas
        return schema_reference(json_schemas()[arg], arg)
    if name == "bench" and arg is None:
        from rmptwin.bench.harness import BenchFiles
        return bench_reference(BenchFiles(reference=repo / "bench" / "reference.json").read_reference())
    raise ValueError(f"unknown marker 'rmptwin-docs: {name}{' ' + arg if arg else ''}'")


def expand(markdown: str, repo: Path = REPO) -> str:
    return MARKER.sub(lambda m: generated(m.group(1), m.group(2), repo), markdown)


# ---------------------------------------------------------------- the notebooks

try:
    from mkdocs.plugins import event_priority
except ImportError:       # the plain functions above serve tests without MkDocs too
    def event_priority(priority):
        return lambda f: f


@event_priority(50)       # before mkdocs-jupyter's on_files (priority 0), which makes .ipynb files pages
def on_files(files, config):
    """The notebooks live at the clone's top (notebooks/*.ipynb, beside docs/), where Jupyter and a
    code host show them; the site takes them from there as pages notebooks/NAME.ipynb, rendered
    by mkdocs-jupyter without running them (tests/unit/test_notebooks.py runs them)."""
    from mkdocs.structure.files import File

    repo = Path(config.config_file_path).parent
    for nb in sorted((repo / "notebooks").glob("*.ipynb")):
        files.append(File(f"notebooks/{nb.name}", src_dir=str(repo), dest_dir=config.site_dir,
                          use_directory_urls=config.use_directory_urls))
    return files


def on_page_markdown(markdown, page, config, files):
    from mkdocs.exceptions import PluginError
    try:
        return expand(markdown, Path(config.config_file_path).parent)
    except ValueError as e:
        raise PluginError(f"{page.file.src_uri}: {e}") from None
