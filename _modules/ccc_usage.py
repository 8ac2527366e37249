"""
Execution module ``ccc_usage``: network usage accounting and live SSH sessions of this node's
ccc-salt containers, read from the host side (``ccc_netstats``: the host's procfs of each
container's process; never ``docker exec``).

* ``collect`` appends the original CCC's line ``<now>:\\t<rx>\\t<tx>`` per running container to
  ``<user_data>/container-net-statistics/<STACK_NAME>-<node>.log`` (``ccc_usage_log``); the
  containers formula runs it as a Salt schedule (``salt/containers/accounting.sls``,
  pillar ``ccc:usage``);
* ``active_sessions`` counts each container's established connections to its port 22, for
  ``salt-run ccc.active_users``.

Only containers ccc-salt created count (``ccc_node_record``). The access network is the one the
containers state made the container's first network (``ccc_engine.create_kwargs``: the first
network of its user type's access class), read back from ``HostConfig.NetworkMode``.
"""

import datetime
import logging
import os

from salt.exceptions import CommandExecutionError

import ccc_engine
import ccc_netstats
import ccc_nfs
import ccc_node_record
import ccc_pillar
import ccc_plan
import ccc_safefs
import ccc_usage_log

log = logging.getLogger(__name__)

__virtualname__ = "ccc_usage"


def __virtual__():
    if ccc_engine.docker is None:
        return False, "ccc_usage needs the docker Python SDK (salt-pip install docker)"
    return __virtualname__


def _ccc():
    return ccc_pillar.pillar_ccc(__pillar__)


def _running(client):
    """``(stack, inspect data)`` of every running container ccc-salt created here, by stack."""
    for stack, summary in sorted(ccc_node_record.managed_containers(client).items()):
        if ccc_node_record.name(summary) != stack or summary.get("State") != "running":
            continue  # a recreate's leftover or a stopped container: nothing to read
        attrs = ccc_engine.inspect(client, summary["Id"])
        if ccc_engine.running(attrs):
            yield stack, attrs


def _usage(client, attrs):
    """``ccc_netstats.container_usage`` of a container, re-inspected by id for the PID check."""
    return ccc_netstats.container_usage(attrs, lambda: ccc_engine.inspect(client, attrs["Id"]))


def settings():
    """
    Show the usage settings: pillar ``ccc:usage`` over the defaults (``accounting``: the
    schedule is on; ``interval_hours``: how often ``collect`` runs).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_usage.settings
    """
    try:
        return ccc_usage_log.settings(_ccc())
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from None


def _measure(client, stack, attrs):
    """``(rx, tx, network)`` of the container's access network; ``ValueError`` says why not."""
    network = (attrs.get("HostConfig") or {}).get("NetworkMode") or ""
    try:
        usage = _usage(client, attrs)
    except ccc_netstats.NetnsGone as exc:
        raise ValueError(str(exc)) from None
    counters = usage["networks"].get(network)
    if counters is None:
        raise ValueError(f"no interface of network {network!r} found in the container's namespace")
    return counters["rx_bytes"], counters["tx_bytes"], network


def collect():
    """
    Append one line ``<now>:\\t<rx>\\t<tx>`` (bytes received and sent on its access network, as
    the container counts them) per running container to
    ``<user_data>/container-net-statistics/<STACK_NAME>-<node>.log``. Returns per stack the
    network, bytes and file, or the error; a container that cannot be read makes the job's
    retcode 1, the others are still written. A symlinked folder or log file is never written
    through: an error names it.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_usage.collect
    """
    ccc = _ccc()
    cluster, node = ccc_pillar.cluster_settings(ccc), ccc_pillar.node_settings(ccc, __grains__["id"])
    user_data, owner = cluster["mount_points"]["nfs"]["user_data"], ccc_pillar.file_owner(cluster)
    missing = ccc_nfs.missing_for(ccc_plan.nfs_fact(ccc, cluster), [user_data])
    if missing:  # the statistics belong on the share: never start a forked copy on the node's disk
        raise CommandExecutionError("; ".join(missing) + "; nothing written")
    results, folder = {}, None
    try:
        with ccc_engine.session(node, CommandExecutionError) as client:
            for stack, attrs in _running(client):
                try:
                    rx, tx, network = _measure(client, stack, attrs)
                except ValueError as exc:
                    results[stack] = {"error": str(exc)}
                    continue
                folder = folder if folder is not None else _open_folder(user_data, owner)
                results[stack] = _append(folder, stack, node["name"], rx, tx, owner, network)
    finally:
        if folder is not None:
            os.close(folder)
    if any("error" in entry for entry in results.values()):
        __context__["retcode"] = 1
    return results


def _open_folder(user_data, owner):
    try:
        return ccc_usage_log.open_folder(user_data, owner)
    except ccc_safefs.UnsafePath as exc:  # its message names the folder
        raise CommandExecutionError(f"{exc.strerror}; nothing written") from None
    except OSError as exc:
        raise CommandExecutionError(f"cannot use {user_data}/{ccc_usage_log.FOLDER}: {exc.strerror or exc}; "
                                    "nothing written") from None


def _append(folder, stack, node_name, rx, tx, owner, network):
    name = ccc_usage_log.log_name(stack, node_name)
    text = ccc_usage_log.line(rx, tx, datetime.datetime.now())
    try:
        ccc_usage_log.append(folder, name, text, owner)
    except OSError as exc:
        log.error("ccc_usage.collect: %s: %s", name, exc.strerror or exc)
        return {"error": f"{ccc_usage_log.FOLDER}/{name}: {exc.strerror or exc}"}
    return {"network": network, "rx_bytes": rx, "tx_bytes": tx, "file": f"{ccc_usage_log.FOLDER}/{name}",
            "line": text.rstrip("\n")}


def active_sessions():
    """
    Show the live SSH sessions of this node's running containers: per STACK_NAME the user
    (``ccc-user.email`` label), the node, the number of established connections to the
    container's port 22 and their peers, read from the container's connection tables on the host
    (``truncated``: a table was longer than is read, ``ccc_netstats.MAX_TCP_BYTES``: at least).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_usage.active_sessions
    """
    ccc = _ccc()
    node = ccc_pillar.node_settings(ccc, __grains__["id"])
    found = {}
    with ccc_engine.session(node, CommandExecutionError) as client:
        for stack, attrs in _running(client):
            try:
                usage = _usage(client, attrs)
            except ccc_netstats.NetnsGone:
                continue  # stopped meanwhile: no sessions
            found[stack] = {"user": ccc_engine.labels(attrs).get("ccc-user.email"), "node": node["name"],
                            "sessions": len(usage["ssh_peers"]), "peers": sorted(usage["ssh_peers"]),
                            "truncated": usage["ssh_peers_truncated"]}
    return found
