"""
Write the migrated pillar tree: ``site/`` as this project's sample site has it (init,
cluster, user_types, users, containers, nodes/<node>.sls) and ``site/secrets.sls`` with every
value GPG-encrypted to the admin's key by ``scripts/ccc-secret`` (the one encryption code; the
value goes through its stdin, never argv). The output folder must not exist or be empty.

Every file starts with a ``#!yaml`` shebang (``#!yaml|gpg`` for the secrets): the imported data
is never rendered by Salt's default ``jinja|yaml`` renderer. Entries holding template syntax
were left out before (``ccc_migrate_markers``); a file that would still hold some is refused.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import yaml

import ccc_migrate_markers as markers

REPO = pathlib.Path(__file__).resolve().parents[1]
CCC_SECRET = REPO / "scripts" / "ccc-secret"
PLAIN_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
PLAIN = "#!yaml\n"  # Salt renders the file as YAML only: no Jinja
HEADER = "# Migrated from the CCC Ansible inventory by scripts/migrate-ansible-inventory ({what}).\n"


class WriteError(Exception):
    """The tree cannot be written (output folder in use, gpg failed)."""


def check_out_dir(out_dir):
    """Refuse an output folder that exists and is not empty (never overwrite an admin's pillar)."""
    out_dir = pathlib.Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise WriteError(f"{out_dir} exists and is not empty: give a new folder (an existing pillar is never overwritten)")


def _sls(ccc, what):
    """A pillar file holding ``ccc``. Non-ASCII text is written as it is, for admins to read,
    unless that would not read back as written: PyYAML writes U+0085 (NEL) raw inside a quoted
    scalar and reads it back as a space, so such a tree is written with escapes instead."""
    body = yaml.safe_dump({"ccc": ccc}, sort_keys=False, default_flow_style=False, allow_unicode=True)
    if yaml.safe_load(body) != {"ccc": ccc}:
        body = yaml.safe_dump({"ccc": ccc}, sort_keys=False, default_flow_style=False)
    return PLAIN + HEADER.format(what=what) + body


def node_file(node):
    """The node's pillar file name (pillar/top.sls replaces dots of the minion id)."""
    return f"site/nodes/{node.replace('.', '_')}.sls"


def plain_files(site, nodes):
    """``{relative path: text}`` of every file but the secrets."""
    files = {"site/init.sls": PLAIN + HEADER.format(what="site") + "include:\n" + "".join(
        f"  - site.{name}\n" for name in ("cluster", "user_types", "users", "containers"))}
    cluster = {key: value for key, value in site.items() if key not in ("user_types", "users", "containers")}
    files["site/cluster.sls"] = _sls(cluster, "cluster variables")
    for name in ("user_types", "users", "containers"):
        files[f"site/{name}.sls"] = _sls({name: site.get(name) or ({} if name != "containers" else [])}, name)
    for node, tree in nodes.items():
        files[node_file(node)] = _sls(tree, f"host_vars of {node}")
    for path, text in files.items():
        if markers.has_marker(text):  # the last guard: what a file holds, not how it was mapped
            raise WriteError(f"{path} would hold template syntax ({{{{, {{% or {{#): nothing written")
    return files


def _encrypt(value, recipient, homedir, indent):
    command = [sys.executable, str(CCC_SECRET), "encrypt", "--recipient", recipient, "--indent", str(indent)]
    command += ["--homedir", str(homedir)] if homedir else []
    proc = subprocess.run(command, input=value, capture_output=True, text=True, timeout=120)
    if proc.returncode:
        raise WriteError(f"encrypting a secret for {recipient} failed: {proc.stderr.strip()}")
    return proc.stdout


def _secret_lines(tree, recipient, homedir, indent):
    lines = []
    for key, value in tree.items():
        name = key if PLAIN_KEY.match(str(key)) else json.dumps(str(key))
        if isinstance(value, dict):
            lines.append(f"{' ' * indent}{name}:\n")
            lines.extend(_secret_lines(value, recipient, homedir, indent + 2))
        else:
            lines.append(f"{' ' * indent}{name}: " + _encrypt(value, recipient, homedir, indent + 2))
    return lines


def secrets_file(secrets, recipient, homedir=None):
    """The text of ``site/secrets.sls``: ``#!yaml|gpg``, each value armored to ``recipient``."""
    body = "".join(_secret_lines({"ccc": {"secrets": secrets}}, recipient, homedir, 0))
    return "#!yaml|gpg\n" + HEADER.format(what="vault secrets, encrypted to " + recipient) + body


def write(out_dir, files):
    """Write ``files`` under ``out_dir`` (made 0700: secrets and user data live there)."""
    out_dir = pathlib.Path(out_dir)
    check_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(out_dir, 0o700)
    for relative, text in files.items():
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return sorted(files)
