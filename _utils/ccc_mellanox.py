"""
The mellanox (OFED driver) role's rules: its apt repositories, the distribution's RDMA/OpenMPI
packages that conflict with OFED (removed only when pillar lists them and OFED is not installed
yet) and the OFED packages. The role never reboots; ``openibd`` is restarted only when the OFED
packages changed. The shape of every key is the role's ``schema.yaml``; here only what compares
one value with another. Plain Python, no Salt imports.
"""

import ccc_role_schema


def repositories(value):
    """``{name: {source, key}}`` (checked by the schema) with each one's keyring and sources file;
    a source must be signed by its own repository's keyring ``/etc/apt/keyrings/<name>.asc``."""
    checked, problems = {}, []
    for name, repo in (value or {}).items():
        keyring = f"/etc/apt/keyrings/{name}.asc"
        if f"[signed-by={keyring}]" not in repo["source"]:
            problems.append(f"ccc:mellanox:repositories:{name}:source must be one line "
                            f"\"deb [signed-by={keyring}] URI suite [components]\" (its own keyring)")
        checked[name] = {"source": repo["source"], "key": repo["key"], "keyring": keyring,
                         "file": f"/etc/apt/sources.list.d/ccc-mellanox-{name}.list"}
    return checked, problems


def plan(settings, ofed_installed, schema):
    """``{"problems", "repositories", "remove", "packages", "service"}`` by the role's ``schema``:
    ``remove`` is the pillar's conflicting packages, or ``[]`` once OFED is installed (its
    uninstaller exists)."""
    result = {"problems": ccc_role_schema.problems("mellanox", settings, schema), "repositories": {},
              "remove": [], "packages": [], "service": None}
    if result["problems"]:
        return result
    result["repositories"], result["problems"] = repositories(settings.get("repositories"))
    result["packages"] = list(settings["packages"])
    result["remove"] = [] if ofed_installed else list(settings.get("conflicting_packages") or [])
    overlap = sorted(set(result["remove"]) & set(result["packages"]))
    if overlap:
        result["problems"].append(f"ccc:mellanox: {', '.join(overlap)} both installed and removed as conflicting")
    result["service"] = settings.get("service")
    return result
