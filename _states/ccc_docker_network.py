"""
State ``ccc_docker_network``: one Docker network matching its pillar definition
(``ccc:cluster:networks:<name>``), owned by the docker role and included by ``containers``.

.. code-block:: yaml

    ccc-cluster-docker-network-claims:
      ccc_docker_network.present:
        - name: claims

A missing network is created; one whose subnet, gateway, ``internal`` or bridge name differs is
recreated while no container is attached. One in use is left alone and the state **fails**,
naming the differences and the containers: a changed subnet that silently stays old would keep
restricted containers on addresses the firewall no longer describes, and a failed state is what
an admin sees in the run's summary and return code (a ``True`` with a warning scrolls past).
The containers still deploy (``containers`` has no requisite on networks).
"""

from salt.exceptions import CommandExecutionError

__virtualname__ = "ccc_docker_network"


def __virtual__():
    return __virtualname__


def _differences(differences):
    return ", ".join(f"{key} {value['old']!r} -> {value['new']!r}" for key, value in sorted(differences.items()))


def present(name):
    """Ensure network ``name`` exists as pillar defines it (see the module's docstring)."""
    test = bool(__opts__["test"])
    try:
        status = __salt__["ccc_docker_host.network_present"](name, test=test)
    except CommandExecutionError as exc:
        return {"name": name, "result": False, "changes": {}, "comment": str(exc)}
    action, differences = status["action"], status["differences"]
    if action == "present":
        return {"name": name, "result": True, "changes": {}, "comment": f"network {name} is as defined"}
    if action == "in use":
        return {"name": name, "result": False, "changes": {},
                "comment": f"network {name} differs from ccc:cluster:networks:{name} ({_differences(differences)}) "
                           f"but is not recreated while containers use it: {', '.join(status['users'])}; "
                           "stop or move them (or remove the network by hand), then apply again"}
    changes = {"network": action}
    if differences:
        changes["differences"] = differences
    comment = f"network {name} {action}" + (f" ({_differences(differences)})" if differences else "")
    return {"name": name, "result": None if test else True, "changes": changes, "comment": comment}
