"""mkdocs hooks: the reference pages are written from the code at build time, so they cannot drift.

A page asks for generated content with a marker on a line of its own::

    <!-- generated: configuration -->   the settings models (receiver.config.Settings)
    <!-- generated: cli -->             every command's --help (receiver.cli.main)
    <!-- generated: openapi -->         the app's /openapi.json document (receiver.openapi)

This is the only file of the docs that imports ``receiver``; every import is inside a function,
so mkdocs loads this file without importing the service, and a module that moves is fixed here.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import re
import textwrap
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

DOCS = Path(__file__).resolve().parent
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace every ``<!-- generated: NAME -->`` line with what NAME renders."""
    renderers = {"configuration": configuration, "cli": cli, "openapi": openapi}

    def render(match: re.Match[str]) -> str:
        name = match[1]
        if name not in renderers:
            raise ValueError(f"{page.file.src_path}: no generator named {name!r}")
        return renderers[name]().rstrip()

    return MARKER.sub(render, markdown)


# --- configuration: the pydantic settings models ----------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _models(annotation: Any) -> list[type]:
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (Union, types.UnionType, dict, tuple):
        return [model for arg in get_args(annotation) for model in _models(arg)]
    return []


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(arg) for arg in get_args(annotation))
    if origin is tuple:
        return f"list of {_type_name(get_args(annotation)[0])}"
    if origin is dict:
        key, value = get_args(annotation)
        return f"table of {_type_name(key)} to {_type_name(value)}"
    if get_origin(annotation) is not None and hasattr(annotation, "__metadata__"):
        return _type_name(get_args(annotation)[0])
    if annotation is type(None):
        return "none"
    if _models(annotation):
        return "table"
    name = getattr(annotation, "__name__", str(annotation))
    return {
        "str": "string",
        "int": "integer",
        "float": "number",
        "bool": "boolean",
        "Path": "path",
        "Secret": "secret",
        "State": "state",
    }.get(name, name)


def _default(info: Any) -> str:
    from pydantic_core import PydanticUndefined

    if info.is_required():
        return "required"
    value = info.default
    if value is PydanticUndefined or value is None:
        return "none"
    if hasattr(value, "model_dump"):
        return "(table)"
    if isinstance(value, (tuple, dict)) and not value:
        return "`[]`" if isinstance(value, tuple) else "`{}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def _constraints(info: Any) -> str:
    words = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "pattern": "matches"}
    found = []
    for item in info.metadata:
        for attr, word in words.items():
            value = getattr(item, attr, None)
            if value is not None:
                found.append(f"{word} `{value}`")
    return ", ".join(found)


def _attribute_docstrings(model: type) -> dict[str, str]:
    """The string literals written under fields in the class body (as pydantic's
    ``use_attribute_docstrings`` would read them)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(model)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    found = {}
    for first, second in itertools.pairwise(body):
        if (
            isinstance(first, ast.AnnAssign)
            and isinstance(first.target, ast.Name)
            and isinstance(second, ast.Expr)
            and isinstance(second.value, ast.Constant)
            and isinstance(second.value.value, str)
        ):
            found[first.target.id] = " ".join(second.value.value.split())
    return found


def _environment_table() -> dict[str, tuple[str, str]]:
    """(default, what) that deployment.md's environment table gives each ``JOBHOOK_*`` variable."""
    text = (DOCS / "deployment.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(JOBHOOK_[A-Z0-9_<>]+)` \| (.*?) \| (.*?) \|$", text, re.M)
    return {name: (default, what) for name, default, what in rows}


def _section(model: type, dotted: str, out: list[tuple[str, Any]]) -> None:
    """Collect (dotted name, model) for a model and the tables under it, depth first; under
    ``[sources.NAME]``, each built-in provider's own table (its ``table_model``)."""
    out.append((dotted, model))
    for field, info in model.model_fields.items():
        if info.exclude:
            continue  # not a key (the provider's table, read by the provider's model)
        inner = _models(info.annotation)
        origin = get_origin(info.annotation)
        if inner:
            suffix = {dict: ".<NAME>", tuple: "[]"}.get(origin, "")
            _section(inner[0], f"{dotted}.{field}{suffix}".lstrip("."), out)
    if dotted == "sources.<NAME>":
        from receiver.providers import PROVIDERS

        for provider in PROVIDERS.values():
            if provider.table_name and provider.table_model:
                _section(provider.table_model, f"{dotted}.{provider.table_name}", out)


def _env_name(dotted: str, field: str) -> str:
    if "[]" in dotted:  # a list of tables: only the whole list, as JSON
        return "JOBHOOK_" + dotted.split("[]")[0].replace(".", "__").upper()
    parts = [*(p for p in dotted.split(".") if p), field]
    return "JOBHOOK_" + "__".join(p if p == "<NAME>" else p.upper() for p in parts)


def _title(dotted: str) -> str:
    if not dotted:
        return "Top level"
    if dotted.endswith("[]"):
        return f"`[[{dotted[:-2]}]]`"
    return f"`[{dotted.replace('<NAME>', 'NAME')}]`"


def _table_owner(dotted: str) -> str | None:
    """The built-in provider whose own table ``dotted`` is (``sources.<NAME>.aws``), if any."""
    from receiver.providers import PROVIDERS

    parts = dotted.split(".")
    if len(parts) != 3 or parts[:2] != ["sources", "<NAME>"]:
        return None
    return next((p.name for p in PROVIDERS.values() if p.table_name == parts[2]), None)


def configuration() -> str:
    from receiver.config import Settings

    described = _environment_table()
    sections: list[tuple[str, Any]] = []
    _section(Settings, "", sections)
    lines: list[str] = []
    for dotted, model in sections:
        lines += [f"### {_title(dotted)}", ""]
        owner = _table_owner(dotted)
        if owner:
            lines += [f'For `provider = "{owner}"` only: the provider\'s own table.', ""]
        doc = model.__dict__.get("__doc__")
        if doc:
            lines += [" ".join(doc.replace("``", "`").split()), ""]
        if model.model_config.get("extra") == "allow":
            lines += ["Any other key is passed to the handler as its own option.", ""]
        if dotted.endswith("[]"):
            lines += [
                f"From the environment only as a whole: `{_env_name(dotted, '')}`. What each "
                "key does, and every handler type's own keys: [Handlers](handlers.md).",
                "",
            ]
        lines += [
            "| key | type | default | allowed | variable | what |",
            "|---|---|---|---|---|---|",
        ]
        docstrings = _attribute_docstrings(model)
        for field, info in model.model_fields.items():
            variable = _env_name(dotted, field)
            table_default, table_what = described.get(variable, ("", ""))
            if "[]" in dotted:
                table_what = ""  # the row describes the whole list
            what = info.description or docstrings.get(field) or table_what
            if not dotted and _models(info.annotation):
                what = what or "a table: see below"
            default = _default(info)
            if default in ("``", "`.`") and table_default:
                default = table_default  # derived at startup (from data_dir)
            shown = "(in the list)" if "[]" in dotted else f"`{variable}`"
            lines.append(
                f"| `{field}` | {_cell(_type_name(info.annotation))} | {_cell(default)} "
                f"| {_cell(_constraints(info))} | {shown} | {_cell(what.replace('``', '`'))} |"
            )
        lines.append("")
    return "\n".join(lines)


# --- the command line: click's own help ----------------------------------------------------------


def cli() -> str:
    import click

    from receiver.cli.main import main

    lines: list[str] = []

    def walk(command: click.Command, path: list[str], parent: click.Context | None) -> None:
        name = " ".join(path)
        ctx = click.Context(
            command, info_name=path[-1], parent=parent, terminal_width=100, max_content_width=100
        )
        level = "#" * min(len(path) + 2, 5)  # under the page's "## Reference"
        lines.extend([f"{level} `{name}`", "", "```text", command.get_help(ctx), "```", ""])
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                child = command.get_command(ctx, sub)
                if child is not None and not child.hidden:
                    walk(child, [*path, sub], ctx)

    walk(main, ["jobhook"], None)
    return "\n".join(lines)


# --- the HTTP API: the app's OpenAPI document ---------------------------------------------------


def _schema_text(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#schema-{name.lower()})"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_schema_text(schema.get('items', {}))}"
    words = [f"`{kind}`"]
    if "enum" in schema:
        words.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"]))
    for key, word in (("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥")):
        if key in schema:
            words.append(f"{word} {schema[key]}")
    if schema.get("nullable"):
        words.append("or null")
    return " ".join(words)


def openapi_spec() -> dict[str, Any]:
    """``/openapi.json`` of an app with every route mounted (an admin token set)."""
    from receiver.config import Settings
    from receiver.service.app import create_app
    from receiver.service.openapi import openapi_document

    settings = Settings.model_validate({"server": {"admin_token": "docs-build-token"}})
    return openapi_document(create_app(settings).routes)


def openapi() -> str:
    spec = openapi_spec()
    lines: list[str] = []
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            open_route = op.get("security") == []
            lines += [f"### `{method.upper()} {path}`", "", op.get("summary", "")]
            role = op.get("x-jobhook-role")
            needs = f"Needs a token with the `{role}` role or above." if role else "Needs a token."
            lines += ["", "Open: no token." if open_route else needs, ""]
            params = op.get("parameters", [])
            if params:
                lines += ["| parameter | in | schema | what |", "|---|---|---|---|"]
                for p in params:
                    required = " (required)" if p.get("required") else ""
                    lines.append(
                        f"| `{p['name']}`{required} | {p['in']} | "
                        f"{_cell(_schema_text(p.get('schema', {})))} "
                        f"| {_cell(p.get('description', ''))} |"
                    )
                lines.append("")
            body = op.get("requestBody")
            if body:
                schema = body.get("content", {}).get("application/json", {}).get("schema", {})
                needed = "required" if body.get("required") else "optional"
                lines += [f"Request body ({needed}): {_schema_text(schema) if schema else 'JSON'}"]
                lines.append("")
            lines += ["| status | what | body |", "|---|---|---|"]
            for status, answer in op.get("responses", {}).items():
                content = answer.get("content", {})
                schema = content.get("application/json", {}).get("schema")
                shown = _schema_text(schema) if schema else ", ".join(f"`{c}`" for c in content)
                lines.append(f"| `{status}` | {_cell(answer['description'])} | {_cell(shown)} |")
            lines.append("")
    lines += ["## Schemas", ""]
    for name, schema in spec["components"]["schemas"].items():
        lines += [
            f"### `{name}` {{ #schema-{name.lower()} }}",
            "",
            "```json",
            json.dumps(schema, indent=2),
            "```",
            "",
        ]
    return "\n".join(lines)
