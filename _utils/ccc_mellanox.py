"""
The mellanox (OFED driver) role's rules: its apt repositories, the distribution's RDMA/OpenMPI
packages that conflict with OFED (removed only when pillar lists them and OFED is not installed
yet) and the OFED packages. The role never reboots; ``openibd`` is restarted only when the OFED
packages changed. Plain Python, no Salt imports.
"""

import re

PACKAGE = re.compile(r"^[a-z0-9][a-z0-9.+-]{1,99}$")
REPO_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
SOURCE = re.compile(r"^deb \[signed-by=/etc/apt/keyrings/(?P<name>[a-z0-9][a-z0-9._-]{0,62})\.asc\] \S+( \S+){1,8}$")
SERVICE = re.compile(r"^[a-zA-Z0-9@._-]{1,100}$")


def _packages(value, key):
    if not isinstance(value, list) or not all(isinstance(n, str) and PACKAGE.fullmatch(n) for n in value):
        raise ValueError(f"ccc:mellanox:{key} must be a list of Debian package names, got {value!r}")
    return list(value)


def repositories(value):
    """``{name: {source, key}}`` checked: the source line uses ``signed-by`` the role's keyring
    ``/etc/apt/keyrings/<name>.asc``; the key is armored text or a ``salt://`` path."""
    if value in (None, {}):
        return {}
    if not isinstance(value, dict):
        raise ValueError("ccc:mellanox:repositories must be a mapping of name -> {source, key}")
    checked = {}
    for name, repo in value.items():
        where = f"ccc:mellanox:repositories:{name}"
        if not (isinstance(name, str) and REPO_NAME.fullmatch(name)) or not isinstance(repo, dict):
            raise ValueError(f"{where}: needs a name of a-z0-9._- and a mapping with source and key")
        source, key = repo.get("source"), repo.get("key")
        match = SOURCE.fullmatch(source or "") if isinstance(source, str) else None
        if not match or match.group("name") != name:
            raise ValueError(f"{where}:source must be one line \"deb [signed-by=/etc/apt/keyrings/{name}.asc] URI suite [components]\"")
        if not (isinstance(key, str) and (key.startswith("salt://") or key.strip().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----"))):
            raise ValueError(f"{where}:key must be the ASCII-armored public key or a salt:// path")
        checked[name] = {"source": source, "key": key, "keyring": f"/etc/apt/keyrings/{name}.asc",
                         "file": f"/etc/apt/sources.list.d/ccc-mellanox-{name}.list"}
    return checked


def plan(settings, ofed_installed):
    """``{"problems", "repositories", "remove", "packages", "service"}``: ``remove`` is the
    pillar's conflicting packages, or ``[]`` once OFED is installed (its uninstaller exists)."""
    result = {"problems": [], "repositories": {}, "remove": [], "packages": [], "service": None}
    rules = (("repositories", lambda: repositories(settings.get("repositories"))),
             ("packages", lambda: _packages(settings.get("packages"), "packages")),
             ("remove", lambda: [] if ofed_installed else _packages(settings.get("conflicting_packages") or [], "conflicting_packages")))
    for key, rule in rules:
        try:
            result[key] = rule()
        except ValueError as exc:
            result["problems"].append(str(exc))
    if not result["packages"] and not result["problems"]:
        result["problems"].append("ccc:mellanox:packages is empty: nothing to install")
    overlap = sorted(set(result["remove"]) & set(result["packages"]))
    if overlap:
        result["problems"].append(f"ccc:mellanox: {', '.join(overlap)} both installed and removed as conflicting")
    service = settings.get("service")
    if service is not None and not (isinstance(service, str) and SERVICE.fullmatch(service)):
        result["problems"].append(f"ccc:mellanox:service must be a unit name or null, got {service!r}")
    result["service"] = service
    return result
