"""
The netplan role's rules: ``ccc:netplan`` turned into a netplan document.

The original rendered a Jinja text template, which produced wrong or invalid YAML (``gateway6``
from the ``gateway4`` value, mis-indented VLAN routes, ``set-name`` without ``match``, a fixed MTU
of 1500). Here the document is built as data and the text is ``yaml.safe_dump`` of that data.
Gateways become ``routes: [{to: default, via: ...}]`` (netplan deprecates ``gateway4``/``gateway6``).
Each value's type, range and shape is the role's ``schema.yaml`` (``ccc_role_schema``), checked
before ``build``; ``build`` keeps the rules that compare one value with another. Plain Python,
no Salt imports.
"""

import difflib
import ipaddress
import re

import yaml

NETPLAN_DIR = "/etc/netplan"
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
KINDS = ("ethernets", "bonds", "vlans")
# Pillar spelling -> netplan's (hyphens): the device flags and the bond parameters.
FLAGS = {"dhcp4": "dhcp4", "dhcp6": "dhcp6", "accept_ra": "accept-ra", "optional": "optional"}
BOND_PARAMETERS = {
    "mode": "mode", "lacp_rate": "lacp-rate", "mii_monitor_interval": "mii-monitor-interval",
    "transmit_hash_policy": "transmit-hash-policy", "primary": "primary", "up_delay": "up-delay",
    "down_delay": "down-delay",
}
HEADER = ("# Written by ccc-salt (cluster role netplan, pillar ccc:netplan). Local edits are overwritten;\n"
          "# change the pillar instead.\n")


def file_path(settings):
    """The role's own file, ``/etc/netplan/<name>.yaml``; ``ValueError`` for a name that is no
    plain file name. The one definition of the name's rule: the clean state removes this path
    without the schema's check, so the rule stays here and ``build`` reports it."""
    name = settings.get("name")
    if not isinstance(name, str) or not FILE_NAME.match(name) or name.endswith(".yaml"):
        raise ValueError("ccc:netplan:name must be a file name without .yaml (letters, digits, '_', '.', '-'), "
                         f"got {name!r}")
    return f"{NETPLAN_DIR}/{name}.yaml"


def _route(key, value, problems):
    """One route ``{to, via, metric}``; ``to`` (``default`` or a network) of ``via``'s IP version."""
    via = ipaddress.ip_address(value["via"])
    route = {"to": "default", "via": str(via)}
    if value["to"] != "default":
        network = ipaddress.ip_network(value["to"], strict=False)
        if network.version != via.version:
            problems.append(f"{key}: to {value['to']} and via {via} are not of the same IP version")
        route["to"] = str(network)
    if value.get("metric") is not None:
        route["metric"] = value["metric"]
    return route


def _default_family(route):
    """4 or 6 for a default route, else None."""
    if route["to"] in ("default", "0.0.0.0/0", "::/0"):
        return ipaddress.ip_address(route["via"]).version
    return None


def _routes(key, device, problems):
    """``routes`` plus the gateways as default routes; one default route per IP version."""
    routes = [_route(f"{key}:routes[{index}]", item, problems) for index, item in enumerate(device.get("routes", []))]
    for version in (4, 6):
        gateway = device.get(f"gateway{version}")
        if gateway is None:
            continue
        if any(_default_family(route) == version for route in routes):
            problems.append(f"{key}: gateway{version} and a default route in routes both set the IPv{version} "
                            "default route; keep one")
            continue
        routes.append({"to": "default", "via": str(ipaddress.ip_address(gateway))})
    return routes


def _nameservers(value):
    """A list of servers (the original's form) or ``{addresses, search}``."""
    if isinstance(value, list):
        value = {"addresses": value}
    result = {}
    if value.get("addresses"):
        result["addresses"] = [str(ipaddress.ip_address(server)) for server in value["addresses"]]
    if value.get("search"):
        result["search"] = list(value["search"])
    return result or None


def _common(key, device, problems):
    """The keys every device kind shares, in netplan's spelling."""
    out = {}
    if device.get("addresses"):
        out["addresses"] = [str(ipaddress.ip_interface(address)) for address in device["addresses"]]
    out.update({name: device[flag] for flag, name in FLAGS.items() if device.get(flag) is not None})
    routes = _routes(key, device, problems)
    if routes:
        out["routes"] = routes
    nameservers = _nameservers(device["nameservers"]) if device.get("nameservers") is not None else None
    if nameservers:
        out["nameservers"] = nameservers
    if device.get("mtu") is not None:
        out["mtu"] = device["mtu"]
    return out


def _ethernet(key, name, device, problems):
    out = _common(key, device, problems)
    if device.get("mac") is not None:
        # set-name only together with match: netplan renames the NIC with this MAC to the key
        out["match"] = {"macaddress": device["mac"].lower()}
        out["set-name"] = name
    return out


def _bond(key, device, ethernets, problems):
    out = _common(key, device, problems)
    members = list(device["interfaces"])
    problems.extend(f"{key}:interfaces: {member!r} is not an interface of ccc:netplan:ethernets"
                    for member in members if member not in ethernets)
    out["interfaces"] = members
    parameters = device.get("parameters") or {}
    if "primary" in parameters and parameters["primary"] not in members:
        problems.append(f"{key}:parameters:primary: {parameters['primary']!r} is not one of the bond's interfaces")
    if parameters:
        out["parameters"] = {BOND_PARAMETERS[name]: value for name, value in parameters.items()}
    return out


def _vlan(key, device, links, problems):
    out = _common(key, device, problems)
    out["id"] = device["id"]
    if device["link"] not in links:
        problems.append(f"{key}:link: {device['link']!r} is not an interface or bond of ccc:netplan")
    out["link"] = device["link"]
    return out


def build(settings):
    """
    ``ccc:netplan`` (defaults merged, passed by the role's schema) → ``(document, problems)``:
    the netplan document as data (``None`` when no interface is defined) and what the schema
    cannot see, each problem naming its key: the file name (``file_path``), a name in two device
    kinds, a bond's interfaces among ethernets and in one bond only, its primary among them, a
    VLAN's link, a route's and a gateway's IP version. A document is only meant to be written
    when ``problems`` is empty.
    """
    problems = []
    try:
        file_path(settings)
    except ValueError as exc:
        problems.append(str(exc))
    devices = {kind: {name: device or {} for name, device in (settings.get(kind) or {}).items()} for kind in KINDS}
    seen = {}
    for kind, named in devices.items():
        for name in named:
            if name in seen:
                problems.append(f"ccc:netplan: {name!r} is defined in both {seen[name]} and {kind}")
            seen[name] = kind
    network = {"version": 2, "renderer": settings.get("renderer")}
    ethernets = {name: _ethernet(f"ccc:netplan:ethernets:{name}", name, device, problems)
                 for name, device in devices["ethernets"].items()}
    bonds = {name: _bond(f"ccc:netplan:bonds:{name}", device, ethernets, problems)
             for name, device in devices["bonds"].items()}
    members = {}
    for bond, device in bonds.items():
        for member in device["interfaces"]:
            if member in members:
                problems.append(f"ccc:netplan:bonds:{bond}:interfaces: {member!r} is already in bond {members[member]}")
            members[member] = bond
    vlans = {name: _vlan(f"ccc:netplan:vlans:{name}", device, set(ethernets) | set(bonds), problems)
             for name, device in devices["vlans"].items()}
    for kind, named in (("ethernets", ethernets), ("bonds", bonds), ("vlans", vlans)):
        if named:
            network[kind] = named
    if not (ethernets or bonds or vlans):
        return None, problems
    return {"network": network}, problems


def render(document):
    """The file's text: a header comment and ``yaml.safe_dump`` of the document (sorted keys)."""
    return HEADER + yaml.safe_dump(document, default_flow_style=False, sort_keys=True)


def diff(old_text, new_text, path):
    """A unified diff of the file (its content is the admin's own pillar, no secret)."""
    return "".join(difflib.unified_diff((old_text or "").splitlines(True), (new_text or "").splitlines(True),
                                        fromfile=path if old_text is not None else "/dev/null",
                                        tofile=path if new_text is not None else "/dev/null"))


def services(settings, node_id):
    """The netplan role runs no service of its own (netplan hands the config to networkd)."""
    return []
