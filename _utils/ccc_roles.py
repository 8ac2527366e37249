"""
The cluster roles: their order, which are on by default, and which ones a run applies.

One definition shared by ``salt/cluster/init.sls`` (through ``ccc_cluster.roles``), each
role's own ``init.sls`` (``ccc_cluster.role_enabled``) and the docs. The order is the original
playbook's (``cluster-deploy.yml``), with its inline tasks (SSH host keys, timezone) at the end
as there, and the NVIDIA driver right before the Docker engine (the original ran it as Docker's
dependency). Pure functions: pillar values in, a decision or a ``ValueError`` out.

Pillar: ``ccc:roles:<role>`` is ``true`` (apply), ``false`` (leave alone) or ``absent`` (apply
the role's ``clean``: undo what it set up, never user data); ``ccc:only_roles`` (a list or the
original's comma-separated string) limits one run to the roles it names, in the order below.
The Mellanox driver role runs only when ``ccc:only_roles`` names it (``ONLY_WHEN_NAMED``).
"""

# (role, on by default). Roles of later work slot in at the original's positions.
ROLES = (
    ("fail2ban", True),
    ("mellanox", False),
    ("netplan", False),
    ("zfs", False),
    ("nvidia", False),
    ("docker", True),
    ("swarm", False),
    ("frp_client", False),
    ("cachefilesd", False),
    ("nfs_storage", False),
    ("superfan_gpu", False),
    ("monitoring_agent", True),
    ("patroller", False),
    ("inotify", True),
    ("sshd_hostkeys", True),
    ("timezone", True),
)
ORDER = tuple(name for name, _ in ROLES)
DEFAULT_ON = {name: on for name, on in ROLES}
# The original's role names (cluster-deploy.yml, only_roles) for the roles that have another name here.
ALIASES = {"sshd-hostkey": "sshd_hostkeys", "frp-client": "frp_client", "superfan-gpu": "superfan_gpu",
           "monitoring-agent": "monitoring_agent", "docker-swarm": "swarm", "nfs-storage": "nfs_storage",
           "mellanox-driver": "mellanox"}
# Roles applied only by a run whose ccc:only_roles names them, as in the original (a driver
# installation is an explicit act); ccc:roles still switches them off or to absent.
ONLY_WHEN_NAMED = ("mellanox",)
# The original's role names that are no role of their own here, as ccc:only_roles may name them
# (an admin's old command line): what a run does for each, said in the run's summary.
# The portainer role declared docker as its dependency, so only_roles=portainer ran docker too.
ONLY_ROLES_MAPPED = {"portainer": ("docker", "the Portainer agent and UI are part of the docker role "
                                             "(ccc:docker:portainer_agent, ccc:docker:portainer_ui)")}
RETIRED = {"compute-container-nightwatch": (
    "the original's nightwatch is replaced by the settings beacon and the master's reactor, which "
    "redeploy a stack when its settings file changes and every stack at a node's start; they are always "
    "on, there is no role to run (docs/roles.md)")}
# Roles whose settings live under another pillar key than ``ccc:<role>``: the agents' own keys,
# which their configuration modules (ccc_fan_config, ccc_exporter_config) already read.
SETTINGS_KEYS = {"superfan_gpu": "fans", "monitoring_agent": "monitoring"}
ABSENT = "absent"


def role_name(name):
    """The role ``name`` stands for (ours or the original's spelling); ``ValueError`` if none."""
    if isinstance(name, str):
        name = name.strip()
        name = ALIASES.get(name, name)
        if name in DEFAULT_ON:
            return name
        if name in ONLY_ROLES_MAPPED:
            raise ValueError(f"{name!r} is no role of its own: {ONLY_ROLES_MAPPED[name][1]}")
        if name in RETIRED:
            raise ValueError(f"{name!r} is no role here: {RETIRED[name]}")
    raise ValueError(f"unknown role {name!r}; the roles are: {', '.join(ORDER)}")


def settings_key(role):
    """The ``ccc:<key>`` pillar mapping that holds ``role``'s settings."""
    return SETTINGS_KEYS.get(role, role)


def switches(roles_pillar):
    """
    ``ccc:roles`` checked: ``{role: True | False | "absent"}`` for every role, defaults filled.
    """
    if roles_pillar is None:
        roles_pillar = {}
    if not isinstance(roles_pillar, dict):
        raise ValueError(f"ccc:roles must be a mapping of role name to true, false or absent, got {type(roles_pillar).__name__}")
    result = dict(DEFAULT_ON)
    for name, value in roles_pillar.items():
        role = role_name(name)
        if not (isinstance(value, bool) or value == ABSENT):
            raise ValueError(f"ccc:roles:{name} must be true, false or absent, got {value!r}")
        result[role] = value
    return result


def only_roles(value):
    """``ccc:only_roles`` as a list of role names (``None`` when the run is not limited)."""
    return only_roles_read(value)[0]


def only_roles_read(value):
    """
    ``ccc:only_roles`` read: ``(role names or None, notes)``. The original's ``portainer`` stands
    for the docker role and ``compute-container-nightwatch`` for nothing (the beacon and reactor
    replace it); each such name gives a note saying so, any other unknown name a ``ValueError``.
    """
    if value in (None, "", []):
        return None, []
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        raise ValueError(f"ccc:only_roles must be a list or a comma-separated string, got {value!r}")
    roles, notes = [], []
    for name in value:
        key = name.strip() if isinstance(name, str) else name
        if key == "":
            continue
        if key in ONLY_ROLES_MAPPED:
            roles.append(ONLY_ROLES_MAPPED[key][0])
            notes.append(f"only_roles {key} runs the {ONLY_ROLES_MAPPED[key][0]} role: {ONLY_ROLES_MAPPED[key][1]}")
        elif key in RETIRED:
            notes.append(f"only_roles {key} runs nothing: {RETIRED[key]}")
        else:
            roles.append(role_name(key))
    return roles, notes


def select(roles_pillar, only=None):
    """
    What one ``state.apply cluster`` does, in role order: ``{"apply": [role], "clean": [role],
    "skipped": {role: why}, "notes": [what an original's role name in only_roles stands for]}``. ``only_roles`` limits the run but never overrides a node's
    explicit ``false``/``absent``: a role switched off for a node stays off there.
    """
    state = switches(roles_pillar)
    limit, notes = only_roles_read(only)
    explicit = set(switches_named(roles_pillar))
    plan = {"apply": [], "clean": [], "skipped": {}, "notes": notes}
    for role in ORDER:
        value = state[role]
        if limit is not None and role not in limit:
            plan["skipped"][role] = "not in ccc:only_roles"
        elif role in ONLY_WHEN_NAMED and limit is None and value != ABSENT:
            plan["skipped"][role] = "runs only when ccc:only_roles names it"
        elif value is True or (limit is not None and value is False and role not in explicit):
            plan["apply"].append(role)
        elif value == ABSENT:
            plan["clean"].append(role)
        else:
            plan["skipped"][role] = "off in ccc:roles" if role in explicit else "off by default (ccc:roles)"
    return plan


def switches_named(roles_pillar):
    """The roles ``ccc:roles`` names explicitly (in our spelling)."""
    return [role_name(name) for name in (roles_pillar or {})]
