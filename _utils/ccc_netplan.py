"""
The netplan role's rules: ``ccc:netplan`` checked and turned into a netplan document.

The original rendered a Jinja text template, which produced wrong or invalid YAML (``gateway6``
from the ``gateway4`` value, mis-indented VLAN routes, ``set-name`` without ``match``, a fixed MTU
of 1500). Here the document is built as data, every pillar value is checked first (each message
names its key), and the text is ``yaml.safe_dump`` of that data. Gateways become ``routes: [{to:
default, via: ...}]`` (netplan deprecates ``gateway4``/``gateway6``). Plain Python, no Salt imports.
"""

import difflib
import ipaddress
import re

import yaml

import ccc_rules

NETPLAN_DIR = "/etc/netplan"
KEYS = ("name", "renderer", "ethernets", "bonds", "vlans")
RENDERERS = ("networkd", "NetworkManager")
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# Linux interface names: at most 15 bytes, no slash, colon or white space.
IFACE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$")
MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
DOMAIN = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?$")
# Keys every device kind accepts (pillar spelling; netplan's own has hyphens).
COMMON = ("addresses", "dhcp4", "dhcp6", "accept_ra", "gateway4", "gateway6", "routes", "nameservers", "mtu",
          "optional")
KIND_KEYS = {"ethernets": COMMON + ("mac",), "bonds": COMMON + ("interfaces", "parameters"),
             "vlans": COMMON + ("id", "link")}
BOND_MODES = ("balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb")
# Bond parameters: pillar key -> (netplan key, check)
BOND_PARAMETERS = {
    "mode": "mode", "lacp_rate": "lacp-rate", "mii_monitor_interval": "mii-monitor-interval",
    "transmit_hash_policy": "transmit-hash-policy", "primary": "primary", "up_delay": "up-delay",
    "down_delay": "down-delay",
}
HEADER = ("# Written by ccc-salt (cluster role netplan, pillar ccc:netplan). Local edits are overwritten;\n"
          "# change the pillar instead.\n")


def file_path(settings):
    """The role's own file, ``/etc/netplan/<name>.yaml``; ``ValueError`` for a name that is no plain file name."""
    name = settings.get("name")
    if not isinstance(name, str) or not FILE_NAME.match(name) or name.endswith(".yaml"):
        raise ValueError(f"ccc:netplan:name must be a file name without .yaml (letters, digits, '_', '.', '-'), got {name!r}")
    return f"{NETPLAN_DIR}/{name}.yaml"


def _bool(key, value, problems):
    if not isinstance(value, bool):
        problems.append(f"{key} must be true or false, got {value!r}")
        return None
    return value


def _whole(key, value, low, high, problems):
    if not ccc_rules.is_whole(value, low, high):
        problems.append(f"{key} must be a whole number from {low} to {high}, got {value!r}")
        return None
    return value


def _list(key, value, problems):
    if not isinstance(value, list):
        problems.append(f"{key} must be a list, got {value!r}")
        return []
    return value


def _address(key, value, problems):
    """An interface address with its prefix length (``10.0.0.5/24``, ``fd00::5/64``)."""
    if not isinstance(value, str) or "/" not in value:
        problems.append(f"{key}: {value!r} is not an address with a prefix length (e.g. 10.0.0.5/24)")
        return None
    try:
        return str(ipaddress.ip_interface(value))
    except ValueError:
        problems.append(f"{key}: {value!r} is not a valid address with a prefix length (e.g. 10.0.0.5/24)")
        return None


def _ip(key, value, problems, version=None):
    try:
        address = ipaddress.ip_address(value if isinstance(value, str) else "")
    except ValueError:
        problems.append(f"{key}: {value!r} is not an IP address")
        return None
    if version and address.version != version:
        problems.append(f"{key}: {value!r} is not an IPv{version} address")
        return None
    return address


def _route(key, value, problems):
    """One route ``{to, via, metric}``; ``to`` is ``default`` or a network of ``via``'s family."""
    if not isinstance(value, dict):
        problems.append(f"{key} must be a mapping with to, via and optionally metric, got {value!r}")
        return None
    unknown = sorted(set(value) - {"to", "via", "metric"})
    if unknown:
        problems.append(f"{key} has unknown keys: {', '.join(map(str, unknown))} (known: to, via, metric)")
    via = _ip(f"{key}:via", value.get("via"), problems)
    to = value.get("to")
    route = {}
    if to == "default":
        route["to"] = "default"
    else:
        try:
            network = ipaddress.ip_network(to if isinstance(to, str) else "", strict=False)
        except ValueError:
            problems.append(f"{key}:to: {to!r} is neither default nor a network (e.g. 10.1.0.0/16)")
            return None
        if via is not None and network.version != via.version:
            problems.append(f"{key}: to {to} and via {via} are not of the same IP version")
        route["to"] = str(network)
    if via is None:
        return None
    route["via"] = str(via)
    if value.get("metric") is not None:
        route["metric"] = _whole(f"{key}:metric", value["metric"], 0, 2 ** 32 - 1, problems)
    return route


def _default_family(route):
    """4 or 6 for a default route, else None."""
    if route["to"] in ("default", "0.0.0.0/0", "::/0"):
        return ipaddress.ip_address(route["via"]).version
    return None


def _routes(key, device, problems):
    """``routes`` plus the gateways as default routes; one default route per IP version."""
    routes = [_route(f"{key}:routes[{index}]", item, problems)
              for index, item in enumerate(_list(f"{key}:routes", device.get("routes", []), problems))]
    routes = [route for route in routes if route]
    for version in (4, 6):
        gateway = device.get(f"gateway{version}")
        if gateway is None:
            continue
        via = _ip(f"{key}:gateway{version}", gateway, problems, version)
        if via is None:
            continue
        if any(_default_family(route) == version for route in routes):
            problems.append(f"{key}: gateway{version} and a default route in routes both set the IPv{version} "
                            "default route; keep one")
            continue
        routes.append({"to": "default", "via": str(via)})
    return routes


def _nameservers(key, value, problems):
    """A list of servers (the original's form) or ``{addresses, search}``."""
    if isinstance(value, list):
        value = {"addresses": value}
    if not isinstance(value, dict):
        problems.append(f"{key} must be a list of addresses or a mapping with addresses and search, got {value!r}")
        return None
    unknown = sorted(set(value) - {"addresses", "search"})
    if unknown:
        problems.append(f"{key} has unknown keys: {', '.join(map(str, unknown))} (known: addresses, search)")
    result = {}
    servers = [_ip(f"{key}:addresses", item, problems)
               for item in _list(f"{key}:addresses", value.get("addresses", []), problems)]
    if servers:
        result["addresses"] = [str(server) for server in servers if server is not None]
    search = _list(f"{key}:search", value.get("search", []), problems)
    for domain in search:
        if not isinstance(domain, str) or not DOMAIN.match(domain):
            problems.append(f"{key}:search: {domain!r} is not a domain name")
    if search:
        result["search"] = list(search)
    return result or None


def _common(key, device, problems):
    """The keys every device kind shares, in netplan's spelling."""
    out = {}
    addresses = [_address(f"{key}:addresses", item, problems)
                 for item in _list(f"{key}:addresses", device.get("addresses", []), problems)]
    if addresses:
        out["addresses"] = [address for address in addresses if address]
    for flag, name in (("dhcp4", "dhcp4"), ("dhcp6", "dhcp6"), ("accept_ra", "accept-ra"), ("optional", "optional")):
        if device.get(flag) is not None:
            out[name] = _bool(f"{key}:{flag}", device[flag], problems)
    routes = _routes(key, device, problems)
    if routes:
        out["routes"] = routes
    if device.get("nameservers") is not None:
        nameservers = _nameservers(f"{key}:nameservers", device["nameservers"], problems)
        if nameservers:
            out["nameservers"] = nameservers
    if device.get("mtu") is not None:
        out["mtu"] = _whole(f"{key}:mtu", device["mtu"], 68, 65535, problems)
    return out


def _ethernet(key, name, device, problems):
    out = _common(key, device, problems)
    mac = device.get("mac")
    if mac is not None:
        if not isinstance(mac, str) or not MAC.match(mac):
            problems.append(f"{key}:mac: {mac!r} is not a MAC address (e.g. 3c:ec:ef:01:02:03)")
        else:
            # set-name only together with match: netplan renames the NIC with this MAC to the key
            out["match"] = {"macaddress": mac.lower()}
            out["set-name"] = name
    return out


def _bond(key, device, ethernets, problems):
    out = _common(key, device, problems)
    members = _list(f"{key}:interfaces", device.get("interfaces"), problems)
    if len(members) < 1:
        problems.append(f"{key}:interfaces must name at least one interface of ccc:netplan:ethernets")
    for member in members:
        if member not in ethernets:
            problems.append(f"{key}:interfaces: {member!r} is not an interface of ccc:netplan:ethernets")
    out["interfaces"] = list(members)
    parameters = device.get("parameters") or {}
    if not isinstance(parameters, dict):
        problems.append(f"{key}:parameters must be a mapping, got {parameters!r}")
        parameters = {}
    unknown = sorted(set(parameters) - set(BOND_PARAMETERS))
    if unknown:
        problems.append(f"{key}:parameters has unknown keys: {', '.join(map(str, unknown))} "
                        f"(known: {', '.join(BOND_PARAMETERS)})")
    if "mode" in parameters and parameters["mode"] not in BOND_MODES:
        problems.append(f"{key}:parameters:mode must be one of {', '.join(BOND_MODES)}, got {parameters['mode']!r}")
    if "primary" in parameters and parameters["primary"] not in members:
        problems.append(f"{key}:parameters:primary: {parameters['primary']!r} is not one of the bond's interfaces")
    out_parameters = {BOND_PARAMETERS[name]: value for name, value in parameters.items() if name in BOND_PARAMETERS}
    if out_parameters:
        out["parameters"] = out_parameters
    return out


def _vlan(key, device, links, problems):
    out = _common(key, device, problems)
    out["id"] = _whole(f"{key}:id", device.get("id"), 1, 4094, problems)
    link = device.get("link")
    if link not in links:
        problems.append(f"{key}:link: {link!r} is not an interface or bond of ccc:netplan")
    out["link"] = link
    return out


def _devices(settings, kind, problems):
    """``ccc:netplan:<kind>`` as ``{name: settings}`` with names and keys checked."""
    devices = settings.get(kind) or {}
    if not isinstance(devices, dict):
        problems.append(f"ccc:netplan:{kind} must be a mapping of interface name to settings, got {devices!r}")
        return {}
    checked = {}
    for name, device in devices.items():
        key = f"ccc:netplan:{kind}:{name}"
        if not isinstance(name, str) or not IFACE_NAME.match(name):
            problems.append(f"{key}: {name!r} is not an interface name (1 to 15 letters, digits, '_', '.', '-')")
            continue
        if device is None:
            device = {}
        if not isinstance(device, dict):
            problems.append(f"{key} must be a mapping of settings, got {device!r}")
            continue
        unknown = sorted(set(device) - set(KIND_KEYS[kind]))
        if unknown:
            problems.append(f"{key} has unknown keys: {', '.join(map(str, unknown))} (known: {', '.join(KIND_KEYS[kind])})")
        checked[name] = device
    return checked


def _top(settings, problems):
    """The top-level keys: file name and renderer."""
    unknown = sorted(set(settings) - set(KEYS))
    if unknown:
        problems.append(f"ccc:netplan has unknown keys: {', '.join(map(str, unknown))} (known: {', '.join(KEYS)})")
    try:
        file_path(settings)
    except ValueError as exc:
        problems.append(str(exc))
    if settings.get("renderer") not in RENDERERS:
        problems.append(f"ccc:netplan:renderer must be one of {', '.join(RENDERERS)}, got {settings.get('renderer')!r}")


def build(settings):
    """
    ``ccc:netplan`` (defaults merged) → ``(document, problems)``: the netplan document as data
    (``None`` when no interface is defined) and every problem found, each naming its key. A
    document is only meant to be written when ``problems`` is empty.
    """
    problems = []
    if not isinstance(settings, dict):
        return None, [f"ccc:netplan must be a mapping of settings, got {settings!r}"]
    _top(settings, problems)
    devices = {kind: _devices(settings, kind, problems) for kind in ("ethernets", "bonds", "vlans")}
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
