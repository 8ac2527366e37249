"""
A container's FRP ports as they apply (the user's lists over the admin's, ``merge_frp``) and the
FRP HTTP subdomains in use cluster-wide, which another container's user may not take. Read
once per run (``subdomain_claims``), then asked per container (``taken_except``). Pure.
"""

import collections.abc

import ccc_pillar
import ccc_schema


def reserved_subdomains(cluster, nodes):
    """``ccc:cluster:reserved_subdomains`` with ``{node}`` expanded for every cluster node."""
    reserved = []
    for name in cluster.get("reserved_subdomains") or []:
        if "{node}" in name:
            reserved.extend(name.replace("{node}", node) for node in nodes)
        else:
            reserved.append(name)
    return reserved


def taken_subdomains(ccc, stored_settings, except_stack=None):
    """
    Map every FRP HTTP subdomain in use (as written and, when prefixed, as ``<node>-<sub>`` for
    every cluster node) to its STACK_NAME, from pillar and accepted user settings.

    ``stored_settings`` maps STACK_NAME -> the last accepted user section (or None).
    """
    return taken_except(subdomain_claims(ccc, stored_settings), except_stack)


def subdomain_claims(ccc, stored_settings, nodes=None):
    """Every FRP HTTP subdomain in use (``taken_subdomains``) -> the STACK_NAMEs that claim it,
    in pillar order: read once per run, then ``taken_except`` per container (each container's
    own walk over every other was the square of the containers). ``nodes``:
    ``ccc_pillar.cluster_nodes`` where the caller has it."""
    claims = {}
    users = (ccc or {}).get("users") or {}
    nodes = ccc_pillar.cluster_nodes(ccc) if nodes is None else nodes
    for entry in (ccc or {}).get("containers") or []:
        stack = entry.get("STACK_NAME") if isinstance(entry, dict) else None
        if stack is None:
            continue
        stored = (stored_settings or {}).get(stack)
        frp = merge_frp(ccc_pillar.merged_record(users, entry).get("FRP_PORTS"),
                         stored.get("FRP_PORTS") if isinstance(stored, dict) else None)
        for http in frp.get("HTTP") if isinstance(frp.get("HTTP"), list) else []:
            if isinstance(http, dict) and http.get("subdomain"):
                # The raw name and every name FRP will serve (``<node>-<sub>`` when prefixed).
                for name in [str(http["subdomain"])] + ccc_schema.served_subdomains(http, nodes):
                    owners = claims.setdefault(name, [])
                    if stack not in owners:
                        owners.append(stack)
    return claims


class Taken(collections.abc.Mapping):
    """
    ``taken_subdomains`` as a view of the run's claims (``subdomain_claims``): each name -> its
    first claimant other than ``except_stack``, looked up when asked. Copying every other
    container's names for each container was the square of the containers in a run.
    """

    def __init__(self, claims, except_stack=None):
        self._claims = claims
        self.except_stack = except_stack

    def __getitem__(self, name):
        for stack in self._claims.get(name, ()):
            if stack != self.except_stack:
                return stack
        raise KeyError(name)

    def __iter__(self):
        return (name for name in self._claims if name in self)

    def __len__(self):
        return sum(1 for _ in self)


def taken_except(claims, except_stack=None):
    """``taken_subdomains`` from ``subdomain_claims`` (a ``Taken`` view)."""
    return Taken(claims, except_stack)


def excluding(taken, stack):
    """``taken`` without the names ``stack`` holds itself (the view as it is when it already
    leaves ``stack`` out)."""
    if isinstance(taken, Taken) and taken.except_stack == stack:
        return taken
    return {name: owner for name, owner in (taken or {}).items() if owner != stack}


def merge_frp(admin, user):
    """CCC semantics: the user's TCP list replaces the admin's, and likewise HTTP."""
    merged = dict(admin) if isinstance(admin, dict) else {}
    merged.update(user if isinstance(user, dict) else {})
    return merged
