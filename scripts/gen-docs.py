#!/usr/bin/env python3
"""Generates the provider's registry docs and the modules' inputs/outputs tables.

    scripts/gen-docs.py [--provider-dir DIR] [--check]

- docs/index.md, docs/resources/<type>.md, docs/data-sources/<name>.md in the layout the
  Terraform registry renders (the one tfplugindocs writes): frontmatter, description, example
  usage, the schema split into Required / Optional / Read-Only with nested blocks and
  attributes, and an import section. The schema comes from `terraform providers schema -json`
  run in a scratch root module that uses the provider built in DIR (default target/debug)
  through a dev_overrides CLI config; examples come from examples/provider/provider.tf,
  examples/resources/<type>/resource.tf (+ import.sh) and
  examples/data-sources/<name>/data-source.tf.
- In modules/<name>/README.md, the text between `<!-- BEGIN_TF_DOCS -->` and
  `<!-- END_TF_DOCS -->`: requirements, inputs and outputs, read from the module's
  versions.tf, variables.tf and outputs.tf.

With --check nothing is written: the script exits 1 naming every file that differs from what
it would generate (or that should not exist), so CI fails when committed docs are stale.
Python 3 standard library only.
"""

import argparse
import html
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROVIDER_SOURCE = "hpcforge/hpc"
PROVIDER_NAME = "hpc"
BEGIN_MARK = "<!-- BEGIN_TF_DOCS -->"
END_MARK = "<!-- END_TF_DOCS -->"
WRITE_ONLY_LINK = "https://developer.hashicorp.com/terraform/language/resources/ephemeral#write-only-arguments"


class DocsError(Exception):
    """A problem the user has to fix (missing example, README without markers, ...)."""


# ----------------------------------------------------------------------------------------------
# The provider schema
# ----------------------------------------------------------------------------------------------


def provider_schema(provider_dir):
    """`terraform providers schema -json` for hpcforge/hpc built in provider_dir."""
    binary = Path(provider_dir) / "terraform-provider-hpc"
    if not binary.exists():
        raise DocsError(f"{binary} does not exist: build it first (cargo build -p terraform-provider-hpc)")
    with tempfile.TemporaryDirectory(prefix="gen-docs-") as work:
        work = Path(work)
        (work / "cli.tfrc").write_text(
            "provider_installation {\n"
            f'  dev_overrides {{ "{PROVIDER_SOURCE}" = "{Path(provider_dir).resolve()}" }}\n'
            "  direct {}\n"
            "}\n"
        )
        (work / "main.tf").write_text(
            "terraform {\n  required_providers {\n"
            f'    {PROVIDER_NAME} = {{ source = "{PROVIDER_SOURCE}" }}\n'
            "  }\n}\n"
        )
        env = dict(os.environ)
        env.update(
            TF_CLI_CONFIG_FILE=str(work / "cli.tfrc"),
            TF_DATA_DIR=str(work / "data"),
            CHECKPOINT_DISABLE="1",
            TF_IN_AUTOMATION="1",
        )
        try:
            run = subprocess.run(
                ["terraform", "providers", "schema", "-json"],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
        except FileNotFoundError:
            raise DocsError("the `terraform` binary is not on PATH: install Terraform >= 1.11") from None
        if run.returncode != 0:
            raise DocsError(f"terraform providers schema -json failed:\n{run.stderr}")
    schemas = json.loads(run.stdout)["provider_schemas"]
    key = next((k for k in schemas if k.endswith("/" + PROVIDER_SOURCE)), None)
    if key is None:
        raise DocsError(f"the schema output has no {PROVIDER_SOURCE}: {sorted(schemas)}")
    return schemas[key]


# ----------------------------------------------------------------------------------------------
# Registry pages (the tfplugindocs layout)
# ----------------------------------------------------------------------------------------------


def type_name(t):
    """A cty type as the registry docs spell it: String, List of String, Map of Number, ..."""
    if isinstance(t, str):
        return {"string": "String", "number": "Number", "bool": "Boolean", "dynamic": "Dynamic"}.get(t, t.title())
    kind = t[0]
    if kind in ("list", "set", "map"):
        return f"{kind.title()} of {type_name(t[1])}"
    if kind == "object":
        return "Object"
    if kind == "tuple":
        return "Tuple"
    return str(t)


def one_line(text):
    return " ".join((text or "").split())


def anchor(kind, path):
    return f"{kind}--{'--'.join(path)}"


def flags_of(attr):
    out = []
    if attr.get("sensitive"):
        out.append("Sensitive")
    if attr.get("write_only"):
        out.append(f"[Write-only]({WRITE_ONLY_LINK})")
    if attr.get("deprecated"):
        out.append("Deprecated")
    return out


def section_of_attr(attr):
    if attr.get("required"):
        return "Required"
    if attr.get("optional"):
        return "Optional"
    return "Read-Only"


def render_block(block, path, nested):
    """Bullet sections of one schema block; nested blocks/attributes are queued in `nested`."""
    sections = {"Required": [], "Optional": [], "Read-Only": []}
    entries = []
    for name, attr in block.get("attributes", {}).items():
        entries.append((name, "attr", attr))
    for name, blk in block.get("block_types", {}).items():
        entries.append((name, "block", blk))
    for name, kind, item in sorted(entries, key=lambda e: e[0]):
        if kind == "attr":
            nested_type = item.get("nested_type")
            if nested_type:
                mode = nested_type.get("nesting_mode", "single")
                label = "Attributes" if mode == "single" else f"Attributes {mode.title()}"
                target = anchor("nestedatt", path + [name])
                nested.append((path + [name], nested_type, target))
                parts = [label] + flags_of(item)
                text = f"- `{name}` ({', '.join(parts)}) {one_line(item.get('description'))}".rstrip()
                text += f" (see [below for nested schema](#{target}))"
            else:
                parts = [type_name(item.get("type", "dynamic"))] + flags_of(item)
                text = f"- `{name}` ({', '.join(parts)}) {one_line(item.get('description'))}".rstrip()
            sections[section_of_attr(item)].append(text)
        else:
            mode = item.get("nesting_mode", "single")
            lo, hi = item.get("min_items", 0), item.get("max_items", 0)
            section = "Required" if lo and lo > 0 else "Optional"
            if mode in ("single", "group"):
                label = f"Block, {section}"
            else:
                label = f"Block {mode.title()}"
                limits = []
                if lo:
                    limits.append(f"Min: {lo}")
                if hi:
                    limits.append(f"Max: {hi}")
                if limits:
                    label += ", " + ", ".join(limits)
            target = anchor("nestedblock", path + [name])
            nested.append((path + [name], item["block"], target))
            desc = one_line(item["block"].get("description"))
            text = f"- `{name}` ({label}) {desc}".rstrip() + f" (see [below for nested schema](#{target}))"
            sections[section].append(text)
    return sections


def render_schema(block):
    """The `## Schema` part of a page."""
    out = ["## Schema", ""]
    nested = []
    sections = render_block(block, [], nested)
    for title in ("Required", "Optional", "Read-Only"):
        if sections[title]:
            out += [f"### {title}", ""] + sections[title] + [""]
    while nested:
        path, blk, target = nested.pop(0)
        out += [f'<a id="{target}"></a>', f"### Nested Schema for `{'.'.join(path)}`", ""]
        sub = []
        inner = render_block(blk, path, sub)
        nested = sub + nested
        for title in ("Required", "Optional", "Read-Only"):
            if inner[title]:
                out += [f"{title}:", ""] + inner[title] + [""]
    return out


def frontmatter(title, description):
    lines = ["---", f'page_title: "{title}"', 'subcategory: ""', "description: |-"]
    for line in (description or "").strip().splitlines() or [""]:
        lines.append(f"  {line}".rstrip())
    lines += ["---", ""]
    return lines


def code_block(lang, text):
    return [f"```{lang}", text.rstrip("\n"), "```", ""]


def read_example(path, what):
    if not path.exists():
        raise DocsError(f"{what} has no example: write {path.relative_to(ROOT)}")
    return path.read_text()


def render_page(name, kind, schema, example, import_text):
    block = schema["block"]
    description = (block.get("description") or "").strip()
    label = {"resource": "Resource", "data-source": "Data Source"}[kind]
    out = frontmatter(f"{name} {label} - terraform-provider-{PROVIDER_NAME}", description)
    out += [f"# {name} ({label})", ""]
    if description:
        out += [description, ""]
    out += ["## Example Usage", ""] + code_block("terraform", example)
    out += render_schema(block)
    if import_text is not None:
        out += ["## Import", "", "Import is supported using the following syntax:", ""]
        out += code_block("shell", import_text)
    return "\n".join(out).rstrip("\n") + "\n"


def render_index(schema, example):
    block = schema["block"]
    description = (block.get("description") or "").strip()
    out = frontmatter(f"{PROVIDER_NAME} Provider", description)
    out += [f"# {PROVIDER_NAME} Provider", ""]
    if description:
        out += [description, ""]
    out += ["## Example Usage", ""] + code_block("terraform", example)
    out += render_schema(block)
    return "\n".join(out).rstrip("\n") + "\n"


def registry_docs(schema):
    """{path relative to ROOT: text} for docs/."""
    docs = {}
    examples = ROOT / "examples"
    docs["docs/index.md"] = render_index(
        schema["provider"], read_example(examples / "provider" / "provider.tf", "the provider")
    )
    for name, res in sorted(schema.get("resource_schemas", {}).items()):
        folder = examples / "resources" / name
        example = read_example(folder / "resource.tf", f"resource {name}")
        import_text = read_example(folder / "import.sh", f"resource {name} (import)")
        docs[f"docs/resources/{name}.md"] = render_page(name, "resource", res, example, import_text)
    for name, ds in sorted(schema.get("data_source_schemas", {}).items()):
        example = read_example(examples / "data-sources" / name / "data-source.tf", f"data source {name}")
        docs[f"docs/data-sources/{name}.md"] = render_page(name, "data-source", ds, example, None)
    return docs


# ----------------------------------------------------------------------------------------------
# A small HCL reader: enough of the syntax to find blocks and their top-level attributes
# ----------------------------------------------------------------------------------------------

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
HEREDOC = re.compile(r"<<(-?)([A-Za-z_][A-Za-z0-9_]*)[ \t]*\n")


class HclError(DocsError):
    pass


def skip_comment(s, i):
    """If a comment starts at i, the index after it (a line comment keeps its newline)."""
    if s.startswith("#", i) or s.startswith("//", i):
        j = s.find("\n", i)
        return len(s) if j < 0 else j
    if s.startswith("/*", i):
        j = s.find("*/", i + 2)
        if j < 0:
            raise HclError("unterminated /* comment")
        return j + 2
    return i


def skip_heredoc(s, i):
    """If a heredoc starts at i, the index after its closing marker line; else i."""
    m = HEREDOC.match(s, i)
    if not m:
        return i
    marker = m.group(2)
    pos = m.end()
    while pos <= len(s):
        end = s.find("\n", pos)
        line = s[pos : len(s) if end < 0 else end]
        if line.strip() == marker:
            return len(s) if end < 0 else end
        if end < 0:
            break
        pos = end + 1
    raise HclError(f"unterminated heredoc <<{marker}")


def skip_string(s, i):
    """s[i] is '"': the index after the closing quote (template interpolations included)."""
    i += 1
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif s.startswith("$${", i) or s.startswith("%%{", i):
            i += 3
        elif s.startswith("${", i) or s.startswith("%{", i):
            i = skip_brackets(s, i + 1)
        elif c == "\n":
            raise HclError("newline in a quoted string")
        else:
            i += 1
    raise HclError("unterminated string")


def skip_brackets(s, i):
    """s[i] is an opening bracket: the index after its match."""
    closing = {"{": "}", "[": "]", "(": ")"}
    stack = [closing[s[i]]]
    i += 1
    while i < len(s):
        j = skip_comment(s, i)
        if j != i:
            i = j
            continue
        j = skip_heredoc(s, i)
        if j != i:
            i = j
            continue
        c = s[i]
        if c == '"':
            i = skip_string(s, i)
        elif c in closing:
            stack.append(closing[c])
            i += 1
        elif c in "}])":
            if c != stack.pop():
                raise HclError(f"mismatched {c!r}")
            i += 1
            if not stack:
                return i
        else:
            i += 1
    raise HclError("unbalanced brackets")


def expression_end(s, i):
    """The end of an attribute's expression starting at i: the first newline outside brackets."""
    while i < len(s):
        if s.startswith("#", i) or s.startswith("//", i):
            return i
        j = skip_comment(s, i)
        if j != i:
            i = j
            continue
        j = skip_heredoc(s, i)
        if j != i:
            i = j
            continue
        c = s[i]
        if c == "\n":
            return i
        if c == '"':
            i = skip_string(s, i)
        elif c in "{[(":
            i = skip_brackets(s, i)
        else:
            i += 1
    return i


def parse_body(s, start=0, end=None):
    """Items of an HCL body: ("attr", name, expression text, indent) and ("block", type, labels, body)."""
    end = len(s) if end is None else end
    items = []
    i = start
    while i < end:
        j = skip_comment(s, i)
        if j != i:
            i = j
            continue
        if s[i].isspace():
            i += 1
            continue
        m = IDENT.match(s, i)
        if not m:
            raise HclError(f"unexpected {s[i]!r} at offset {i}")
        name = m.group(0)
        line_start = s.rfind("\n", 0, i) + 1
        indent = i - line_start
        i = m.end()
        while i < end and s[i] in " \t":
            i += 1
        if s.startswith("=", i) and not s.startswith("==", i):
            expr_start = i + 1
            expr_end = expression_end(s, expr_start)
            items.append(("attr", name, s[expr_start:expr_end].strip(), indent))
            i = expr_end
            continue
        labels = []
        while i < end and s[i] != "{":
            if s[i] == '"':
                j = skip_string(s, i)
                labels.append(s[i + 1 : j - 1])
                i = j
            elif s[i] in " \t":
                i += 1
            else:
                m = IDENT.match(s, i)
                if not m:
                    raise HclError(f"unexpected {s[i]!r} after {name!r}")
                labels.append(m.group(0))
                i = m.end()
        if i >= end:
            raise HclError(f"block {name} has no body")
        close = skip_brackets(s, i)
        items.append(("block", name, labels, s[i + 1 : close - 1]))
        i = close
    return items


def string_value(expr):
    """The text of a string literal or heredoc expression, or None for anything else."""
    m = HEREDOC.match(expr)
    if m:
        body = expr[m.end() :]
        lines = body.split("\n")
        if lines and lines[-1].strip() == m.group(2):
            lines = lines[:-1]
        if m.group(1) == "-":
            width = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
            lines = [l[width:] for l in lines]
        return "\n".join(lines)
    if expr.startswith('"'):
        try:
            if skip_string(expr, 0) != len(expr):
                return None
        except HclError:
            return None
        out, i, body = [], 0, expr[1:-1]
        escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
        while i < len(body):
            if body[i] == "\\" and i + 1 < len(body):
                out.append(escapes.get(body[i + 1], body[i + 1]))
                i += 2
            elif body.startswith("$${", i) or body.startswith("%%{", i):
                out.append(body[i + 1 : i + 3])
                i += 3
            else:
                out.append(body[i])
                i += 1
        return "".join(out)
    return None


def dedent_expression(expr, indent):
    """Removes the attribute's own indentation from an expression's continuation lines."""
    lines = expr.split("\n")
    rest = [l[indent:] if l[:indent].strip() == "" else l.lstrip() for l in lines[1:]]
    return "\n".join([lines[0]] + rest)


def module_blocks(folder, kind):
    """{name: {attribute: (expression, indent)}} of the `kind` blocks in every .tf file of folder."""
    found = {}
    for path in sorted(folder.glob("*.tf")):
        text = path.read_text()
        try:
            items = parse_body(text)
        except HclError as e:
            raise DocsError(f"{path.relative_to(ROOT)}: {e}") from None
        for item in items:
            if item[0] == "block" and item[1] == kind and item[2]:
                attrs = {a[1]: (a[2], a[3]) for a in parse_body(item[3]) if a[0] == "attr"}
                found[item[2][0]] = attrs
    return found


def requirements(folder):
    """[(name, constraint)] from the terraform block: terraform itself, then each provider."""
    out = []
    for path in sorted(folder.glob("*.tf")):
        for item in parse_body(path.read_text()):
            if item[0] != "block" or item[1] != "terraform":
                continue
            for inner in parse_body(item[3]):
                if inner[0] == "attr" and inner[1] == "required_version":
                    out.insert(0, ("terraform", string_value(inner[2]) or inner[2]))
                if inner[0] == "block" and inner[1] == "required_providers":
                    for prov in parse_body(inner[3]):
                        if prov[0] != "attr":
                            continue
                        m = re.search(r'version\s*=\s*"([^"]*)"', prov[2])
                        out.append((prov[1], m.group(1) if m else "n/a"))
    return out


# ----------------------------------------------------------------------------------------------
# Module README tables
# ----------------------------------------------------------------------------------------------


def cell(text):
    return one_line(text).replace("|", "\\|")


def code_cell(expr):
    """An HCL expression in a table cell: inline code, or <pre> when it spans lines."""
    if "\n" not in expr:
        return "`" + expr.replace("|", "\\|") + "`"
    escaped = html.escape(expr, quote=False).replace("|", "&#124;")
    return "<pre>" + "<br/>".join(escaped.split("\n")) + "</pre>"


def module_tables(folder):
    variables = module_blocks(folder, "variable")
    outputs = module_blocks(folder, "output")
    rel = folder.relative_to(ROOT)
    out = [BEGIN_MARK, "## Requirements", "", "| Name | Version |", "|------|---------|"]
    for name, version in requirements(folder):
        out.append(f"| {name} | `{version}` |")
    out += ["", "## Inputs", ""]
    if variables:
        out += ["| Name | Description | Type | Default | Required |", "|------|-------------|------|---------|:--------:|"]
        # Required inputs first, then optional ones, each alphabetical (as terraform-docs sorts).
        ordered = sorted(variables.items(), key=lambda kv: ("default" in kv[1], kv[0]))
        for name, attrs in ordered:
            description = attrs.get("description")
            if description is None:
                raise DocsError(f"{rel}: variable {name} has no description")
            if "type" not in attrs:
                raise DocsError(f"{rel}: variable {name} has no type")
            desc = string_value(description[0])
            if desc is None:
                raise DocsError(f"{rel}: the description of variable {name} is not a plain string")
            typ = code_cell(dedent_expression(*attrs["type"]))
            if "default" in attrs:
                default, required = code_cell(dedent_expression(*attrs["default"])), "no"
            else:
                default, required = "n/a", "yes"
            notes = []
            if attrs.get("sensitive", ("false",))[0] == "true":
                notes.append("sensitive")
            if attrs.get("ephemeral", ("false",))[0] == "true":
                notes.append("ephemeral")
            suffix = f" ({', '.join(notes)})" if notes else ""
            out.append(f"| `{name}` | {cell(desc)}{suffix} | {typ} | {default} | {required} |")
    else:
        out.append("No inputs.")
    out += ["", "## Outputs", ""]
    if outputs:
        out += ["| Name | Description |", "|------|-------------|"]
        for name, attrs in sorted(outputs.items()):
            if "description" not in attrs:
                raise DocsError(f"{rel}: output {name} has no description")
            desc = string_value(attrs["description"][0])
            if desc is None:
                raise DocsError(f"{rel}: the description of output {name} is not a plain string")
            out.append(f"| `{name}` | {cell(desc)} |")
    else:
        out.append("No outputs.")
    out.append(END_MARK)
    return "\n".join(out)


def module_readmes():
    """{path relative to ROOT: text} for every modules/<name>/README.md."""
    docs = {}
    for folder in sorted(p for p in (ROOT / "modules").iterdir() if p.is_dir()):
        if not list(folder.glob("*.tf")):
            continue
        readme = folder / "README.md"
        rel = str(readme.relative_to(ROOT))
        if not readme.exists():
            raise DocsError(f"{rel} is missing: write one with {BEGIN_MARK} and {END_MARK} where the tables go")
        text = readme.read_text()
        start, end = text.find(BEGIN_MARK), text.find(END_MARK)
        if start < 0 or end < start:
            raise DocsError(f"{rel} has no {BEGIN_MARK} ... {END_MARK} section for the inputs/outputs tables")
        docs[rel] = text[:start] + module_tables(folder) + text[end + len(END_MARK) :]
    return docs


# ----------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider-dir", default=str(ROOT / "target" / "debug"),
                        help="folder holding terraform-provider-hpc (default: target/debug)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming the files that differ from the generated ones")
    args = parser.parse_args()
    try:
        wanted = registry_docs(provider_schema(args.provider_dir))
        wanted.update(module_readmes())
    except DocsError as e:
        print(f"gen-docs: {e}", file=sys.stderr)
        return 2

    # Generated pages that no longer have a resource are stale.
    stale = sorted(
        str(p.relative_to(ROOT))
        for sub in ("resources", "data-sources")
        for p in (ROOT / "docs" / sub).glob("*.md")
        if str(p.relative_to(ROOT)) not in wanted
    )
    changed = sorted(
        rel for rel, text in wanted.items()
        if not (ROOT / rel).exists() or (ROOT / rel).read_text() != text
    )
    if args.check:
        if not changed and not stale:
            print(f"docs are up to date ({len(wanted)} files)")
            return 0
        for rel in changed:
            what = "is missing" if not (ROOT / rel).exists() else "differs from the generated one"
            print(f"{rel} {what}", file=sys.stderr)
        for rel in stale:
            print(f"{rel} documents nothing the provider has (delete it)", file=sys.stderr)
        print("docs are out of date: run `make docs` and commit the result", file=sys.stderr)
        return 1
    for rel in changed:
        path = ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(wanted[rel])
        print(f"wrote {rel}")
    for rel in stale:
        (ROOT / rel).unlink()
        print(f"removed {rel}")
    if not changed and not stale:
        print(f"docs are up to date ({len(wanted)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
