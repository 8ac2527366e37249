"""
The one planner: reads everything a resolution needs once, then calls the pure resolver once
per container.

``read_inputs`` reads what every container of a run shares: the pillar copy, the cluster and
node settings, every stack's last accepted settings (for taken subdomains), the master's notices,
and the node facts (GPUs, the docker group, image lookups that pull each image at most once per
run, GitHub keys). ``plan`` adds what is the container's own (its settings file, read safely
and bounded, and its last accepted settings) and returns ``ccc_resolver.resolve_container``'s
resolution, the report included: the engine applies it, ``ccc_feedback`` writes it.
"""

import grp
import os

import ccc_images
import ccc_keys
import ccc_last_good
import ccc_nfs
import ccc_pillar
import ccc_redact
import ccc_resolver
import ccc_rules
import ccc_settings_file
import ccc_subdomains
import ccc_swarm
import ccc_swarm_engine

NOTICE_MAX_CHARS = 300


class Inputs:
    """What every container of one run shares (read once by ``read_inputs``; read-only after)."""

    def __init__(self, ccc, cluster, node, facts, stored, notices, swarm=None, nfs_missing=None):
        self.ccc = ccc
        # Looked up once per container: made once per run (a scan per container is N² at 500).
        self.index = ccc_pillar.entries_by_stack(ccc)  # STACK_NAME -> its pillar entries
        self.cluster_nodes = ccc_pillar.cluster_nodes(ccc)
        self.claims = ccc_subdomains.subdomain_claims(ccc, stored, self.cluster_nodes)  # FRP subdomains -> their stacks
        self.nfs_missing = nfs_missing or {}  # ``nfs_fact``: required NFS mount points not mounted, with why
        self.swarm = swarm  # the engine's swarm facts (``swarm_fact``), None where the role is off
        self.cluster = cluster
        self.node = node
        self.facts = facts
        self.stored = stored
        self.notices = notices


def node_facts(ccc, minion_id, clients, pull=True, fetch=True):
    """
    What the resolver needs to know about this node: its GPUs, the docker group, the host's
    time zone files, images (``clients()`` gives the calling thread's Docker client; missing
    images are pulled when ``pull``) and GitHub keys (fetched when ``fetch``, else cached).
    """
    node = ccc_pillar.node_settings(ccc, minion_id)
    cluster = ccc_pillar.cluster_settings(ccc)
    try:
        docker_gid = grp.getgrnam("docker").gr_gid
    except KeyError:
        docker_gid = None
    return ccc_resolver.NodeFacts(
        name=node["name"],
        compute_devices=node["compute_devices"],
        docker_gid=docker_gid,
        host_timezone_files=[p for p in ("/etc/timezone", "/etc/localtime") if os.path.exists(p)],
        image_lookup=_image_lookup(cluster, clients, pull),
        github_keys=ccc_keys.github_keys_for(cluster, fetch,
                                             os.path.join(node["state_dir"], "github-keys")),
    )


def _image_lookup(cluster, clients, pull):
    """Image lookups under ``ccc:cluster:image_policy:pull``; a bad value holds every container
    with the reason (nothing is pulled or recreated) instead of failing the whole run."""
    try:
        mode = ccc_images.pull_mode(cluster.get("image_policy"))
    except ValueError as exc:
        message = str(exc)
        return lambda ref, credentials: (None, message)
    return ccc_images.ImageLookup(clients, pull, mode)


def read_inputs(ccc, minion_id, clients, pull=False, notices=None):
    """
    Read once what the containers of a run share. ``ccc``: the plain ``ccc`` pillar
    (``ccc_pillar.pillar_ccc``); ``pull``: pull missing images and fetch GitHub keys (a deploy),
    else only look (test runs, ``resolve``); ``notices``: the master's ``ccc_notice`` pillar
    (STACK_NAME -> a sentence for that user's report, e.g. why a redeploy was held back).
    """
    cluster = ccc_pillar.cluster_settings(ccc)
    return Inputs(
        ccc=ccc,
        cluster=cluster,
        node=ccc_pillar.node_settings(ccc, minion_id),
        facts=node_facts(ccc, minion_id, clients, pull=pull, fetch=pull),
        stored=ccc_last_good.read_all(cluster),
        notices={stack: text for stack, text in (notices or {}).items() if isinstance(text, str)}
        if isinstance(notices, dict) else {},
        swarm=swarm_fact(ccc, minion_id, clients),
        nfs_missing=nfs_fact(ccc, cluster),
    )


def nfs_fact(ccc, cluster, mountinfo="/proc/self/mountinfo"):
    """The NFS mount points the containers need (``ccc:cluster:mount_points:nfs_required``) that
    are not on their share now, ``{path: why}``: this node's mount table, read once per run."""
    required = ccc_nfs.required_points(ccc, cluster)
    if not required:
        return {}
    with open(mountinfo, encoding="utf-8", errors="surrogateescape") as handle:
        return ccc_nfs.storage_fact(required, ccc_nfs.parse_mountinfo(handle.read()))


def swarm_fact(ccc, minion_id, clients):
    """Whether this node's containers join their stacks' overlays (the swarm role on and the
    engine an active swarm member), read once per run; ``None`` where the role is off."""
    if not ccc_swarm.role_on(ccc):
        return None
    return ccc_swarm_engine.engine_fact(clients(), ccc.get("swarm") or {}, minion_id)


def _user_files(inputs, record):
    """``(settings text, settings error, last accepted settings)`` of one container: its user's
    settings file (bounded, safe read) and its last-good copy; nothing without a valid e-mail."""
    if not (record and ccc_rules.is_email(record.get("USER_EMAIL"))):
        return None, None, None
    paths = ccc_pillar.settings_paths(inputs.cluster, record)
    text = error = None
    try:
        text = ccc_settings_file.read_settings_file(paths["settings_file"])
    except ccc_settings_file.SettingsError as exc:
        error = str(exc)
    return text, error, ccc_last_good.read(paths["last_good_file"])


def plan(inputs, stack):
    """The resolution of one container on this node (see ``ccc_resolver.resolve_container``)."""
    record = ccc_pillar.container_record(inputs.ccc, stack, index=inputs.index)
    text, error, last_good = _user_files(inputs, record[0])
    resolution = ccc_resolver.resolve_container(
        inputs.ccc, stack, inputs.facts, settings_text=text, settings_error=error, last_good=last_good,
        taken=ccc_subdomains.taken_except(inputs.claims, except_stack=stack),
        cluster=inputs.cluster, record=record, nodes=inputs.cluster_nodes,
    )
    if resolution["action"] == "run":
        resolution["overlay"] = ccc_swarm.attachment(stack, inputs.facts.name, inputs.swarm)
        resolution["storage_missing"] = ccc_nfs.missing_for(inputs.nfs_missing, ccc_nfs.paths_used(resolution))
    if stack in inputs.notices:
        resolution["user_messages"] = list(resolution["user_messages"]) + [inputs.notices[stack][:NOTICE_MAX_CHARS]]
    return resolution


def display(ccc, minion_id, stack, clients, pull=False):
    """One container's resolution for people and job returns: secrets masked (``ccc_redact``)."""
    return ccc_redact.redact(plan(read_inputs(ccc, minion_id, clients, pull=pull), stack))
