"""
The node's Docker networks, one owner: which networks a node has, and making one match its
pillar definition (``ccc:cluster:networks:<name>``: ``subnet``, ``gateway``, ``internal``,
``bridge_name``; plain bridges).

A network whose definition changed is recreated only while no container (running or stopped)
is attached to it; one in use is left as it is and reported (``in use``), never removed under
a container. Only the keys a definition sets are compared, so a network without a definition
is simply made to exist.
"""

import ccc_rules

try:
    import docker
    import docker.errors
    import docker.types
except ImportError:  # pragma: no cover - reported by the execution module's __virtual__
    docker = None

BRIDGE_OPTION = "com.docker.network.bridge.name"


def wanted_networks(cluster):
    """
    ``{name: definition}`` of every network this node needs: each of ``ccc:cluster:networks``
    and every network containers join (``access_networks``, ``claims_network``) without one.
    """
    wanted = {name: dict(definition or {}) for name, definition in (cluster.get("networks") or {}).items()}
    joined = [net for nets in (cluster.get("access_networks") or {}).values() for net in (nets or [])]
    if cluster.get("claims_network"):
        joined.append(cluster["claims_network"])
    for name in joined:
        wanted.setdefault(name, {})
    return wanted


def _live(attrs):
    """The comparable definition of a network, from the engine's list (its entries carry the
    IPAM, options and internal flag an inspect gives, without the attached containers)."""
    pools = (attrs.get("IPAM") or {}).get("Config") or [{}]
    return {"subnet": pools[0].get("Subnet"), "gateway": pools[0].get("Gateway"),
            "internal": bool(attrs.get("Internal")),
            "bridge_name": (attrs.get("Options") or {}).get(BRIDGE_OPTION)}


def differences(definition, attrs):
    """``{key: {"old", "new"}}`` for each key the definition sets that the live network lacks."""
    live = _live(attrs)
    wanted = {key: definition[key] for key in ("subnet", "gateway", "bridge_name") if definition.get(key)}
    wanted["internal"] = bool(ccc_rules.truthy(definition.get("internal")))
    return {key: {"old": live[key], "new": value} for key, value in wanted.items() if live[key] != value}


def users(client, name):
    """Names of the containers (running or not) attached to network ``name``."""
    return sorted(c["Names"][0].lstrip("/") for c in client.api.containers(all=True, filters={"network": name}))


def create(client, name, definition):
    """Create ``name`` as a bridge from its definition, labelled as ccc-salt's."""
    ipam = None
    if definition.get("subnet"):
        pool = docker.types.IPAMPool(subnet=definition["subnet"], gateway=definition.get("gateway"))
        ipam = docker.types.IPAMConfig(pool_configs=[pool])
    options = {BRIDGE_OPTION: definition["bridge_name"]} if definition.get("bridge_name") else None
    client.api.create_network(
        name, driver="bridge", internal=bool(ccc_rules.truthy(definition.get("internal"))), ipam=ipam,
        options=options, labels={ccc_rules.MANAGED_BY_LABEL: ccc_rules.MANAGED_BY_VALUE},
    )


def ensure(client, name, definition, test=False):
    """
    Make network ``name`` match ``definition``. Returns ``{"action", "differences", "users"}``;
    action is ``present``, ``created``, ``recreated`` (``would be ...`` in test mode) or
    ``in use`` (differs, but containers are attached: left alone).
    """
    found = [net for net in client.api.networks(names=[name]) if net["Name"] == name]
    if not found:
        if not test:
            create(client, name, definition)
        return {"action": "would be created" if test else "created", "differences": {}, "users": []}
    diff = differences(definition, found[0])
    if not diff:
        return {"action": "present", "differences": {}, "users": []}
    attached = users(client, name)
    if attached:
        return {"action": "in use", "differences": diff, "users": attached}
    if not test:
        client.api.remove_network(found[0]["Id"])
        create(client, name, definition)
    return {"action": "would be recreated" if test else "recreated", "differences": diff, "users": []}
