"""
Map the decrypted vault variables (``vault_vars/cluster-secrets.yml``) to ``ccc:secrets``. The
report names keys only; values stay in the returned mapping, which only the GPG writer sees.
"""

# (vault path, ccc:secrets path)
PAIRS = [
    ("frpc_secure:auth_token", "frp:token"),
    ("monitoring_agent_secure:user", "basic_auth:metrics:user"),
    ("monitoring_agent_secure:pass", "basic_auth:metrics:password"),
    ("patroller_secure:user", "basic_auth:monitor:user"),
    ("patroller_secure:pass", "basic_auth:monitor:password"),
    ("portainer_secure:agent_token", "portainer:agent_secret"),
]
NOT_MAPPED = {
    "docker_secure:potrainer_agent_token": "stale in the original (its portainer role read portainer_secure.agent_token)",
    "compute_container_nightwatch_secure": "there is no nightwatch: the pillar lives on the salt-master",
    "sshd_secure": "each container gets its own SSH host keys (difference sshd-host-keys); the nodes' own sshd keys stay as they are",
}


def _get(tree, path):
    for part in path.split(":"):
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def _put(tree, path, value):
    parts = path.split(":")
    for part in parts[:-1]:
        tree = tree.setdefault(part, {})
    tree[parts[-1]] = value


def _leaves(tree, prefix=""):
    """Colon paths of every leaf in ``tree``."""
    if not isinstance(tree, dict):
        return [prefix]
    return [leaf for key, value in tree.items() for leaf in _leaves(value, f"{prefix}:{key}" if prefix else str(key))]


def map_secrets(vault_vars, report, source):
    """``ccc:secrets`` (plain values) from the decrypted vault variables."""
    secrets, used = {}, set()
    for theirs, ours in PAIRS:
        value = _get(vault_vars, theirs)
        if value not in (None, ""):
            _put(secrets, ours, str(value))
            used.add(theirs)
            report.mapped(source, theirs.replace(":", "."), f"ccc:secrets:{ours} (site/secrets.sls, GPG)")
    registries = _get(vault_vars, "docker_secure:registry_auth") or {}
    for host, login in registries.items():
        for field in ("username", "password"):
            if isinstance(login, dict) and login.get(field) not in (None, ""):
                _put(secrets, f"registries:{host}:{field}", str(login[field]))
                used.add(f"docker_secure:registry_auth:{host}:{field}")
                report.mapped(source, f"docker_secure.registry_auth.{host}.{field}",
                              f"ccc:secrets:registries:{host}:{field} (site/secrets.sls, GPG)")
    for leaf in _leaves(vault_vars):
        if leaf in used:
            continue
        reason = next((why for prefix, why in NOT_MAPPED.items() if leaf == prefix or leaf.startswith(prefix + ":")),
                      "no ccc:secrets key takes it")
        report.not_mapped(source, leaf.replace(":", "."), reason)
    return secrets
