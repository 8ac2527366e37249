"""
The template-syntax rule (``ccc_migrate_markers``, shared with the inventory pillar) applied to
what only the offline migration reads: the hosts of the ccc-cluster group (a node's name also
names its pillar file) and the decrypted vault's variables. Each entry left out is a
``refused`` entry of the report, by key names only.
"""

import ccc_migrate_markers as shared

SECRET_REASON = ("holds template syntax ({{, {% or {#): left out of ccc:secrets (Ansible templated it too); "
                 "set the value with scripts/ccc-secret")


def node_problem(node):
    """Why ``node`` (a host of the ccc-cluster group) cannot name a pillar file, or None."""
    text = str(node)
    if shared.has_marker(text):
        return "its name holds template syntax ({{, {% or {#)"
    if not text or not text.isprintable() or "/" in text or "\\" in text:
        return ("its name is not one printable line without / or \\ "
                "(it names the node's pillar file and is written into it)")
    return None


def inventory(read, report):
    """The inventory ``read`` (``inventory.read``) without the nodes, variables and
    records that hold markers; each one left out is a ``refused`` entry of ``report``."""
    nodes, host_vars = {}, {}
    for node, meta in read["nodes"].items():
        problem = node_problem(node)
        if problem:
            report.refused(read["hosts_file"], f"host {shared.name(node)}", f"{problem}: the node is left out")
            continue
        nodes[node] = meta
        host_vars[node] = shared.variables(read["host_vars"].get(node) or {}, report)
    return {**read, "nodes": nodes, "host_vars": host_vars, "group_vars": shared.variables(read["group_vars"], report)}


def secrets(vault_vars, report, source, path=""):
    """The decrypted vault variables without the keys and values that hold markers."""
    kept = {}
    for key, value in vault_vars.items():
        here = f"{path}.{shared.name(key)}" if path else shared.name(key)
        if shared.has_marker(key) or (not isinstance(value, dict) and shared.marked(value)):
            report.refused(source, here, SECRET_REASON)
        elif isinstance(value, dict):
            kept[key] = secrets(value, report, source, here)
        else:
            kept[key] = value
    return kept
