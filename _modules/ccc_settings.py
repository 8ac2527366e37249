"""
The user settings file ``~/.containers/<STACK_NAME>.yml``: safe reading, parsing and validation.

Users own this file, so everything here treats it as hostile data: it is opened without
following symlinks, must be a small regular file, is parsed with a YAML loader that refuses
aliases (no "billion laughs"), and is validated against ``USER_SETTINGS_SCHEMA`` plus the
cluster rules (allowed nodes, image policy, SHM maximum, reserved and taken subdomains).
The same schema is shipped as ``schema/container-settings.schema.json`` for editors.

All functions are plain Python; ``schema`` and ``check_file`` are the Salt-facing wrappers.
"""

import errno
import os
import re
import stat

import yaml

try:
    import jsonschema
except ImportError:  # pragma: no cover - reported by __virtual__
    jsonschema = None

__virtualname__ = "ccc_settings"

MAX_SETTINGS_BYTES = 64 * 1024
NO_CONTROL_CHARS = r"^[^\x00-\x1f\x7f]*$"
USER_NAME_PATTERN = r"^[a-z_][a-z0-9_-]{0,31}$"
SUBDOMAIN_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
NODE_NAME_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,62})$"
PACKAGE_LIST_PATTERN = r"^([a-z0-9][a-z0-9+.:=~_-]{0,127}( [a-z0-9][a-z0-9+.:=~_-]{0,127})*)?$"
KEY_URL_LIST_PATTERN = r"^(https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/+-]*)?(,https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/+-]*)?)*)?$"
SOURCE_ENTRY = (
    r"(ppa:[A-Za-z0-9.+_-]+/[A-Za-z0-9.+_-]+"
    r"|(deb (\[[A-Za-z0-9=_./ -]+\] )?)?https?://[A-Za-z0-9.:/_~%+-]+( [A-Za-z0-9._/-]+)*)"
)
SOURCE_LIST_PATTERN = rf"^({SOURCE_ENTRY}(,{SOURCE_ENTRY})*)?$"
IMAGE_PATTERN = (
    r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$"
)
GITHUB_LOGIN_PATTERN = r"^[A-Za-z0-9](-?[A-Za-z0-9]){0,38}$"
SIZE_PATTERN = r"^[0-9]+(\.[0-9]+)?\s*([kKmMgGtT]([iI]?[bB])?|[bB])?$"
PUBKEY_LINE = re.compile(
    r"^(ssh-(rsa|ed25519|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)"
    r" [A-Za-z0-9+/]+={0,3}( [^\x00-\x1f\x7f]{0,200})?$"
)

USER_SETTABLE_KEYS = (
    "CONTAINER_IMAGE",
    "DEPLOYMENT_NODES",
    "INSTALL_PACKAGES",
    "INSTALL_REPOSITORY_KEYS",
    "INSTALL_REPOSITORY_SOURCES",
    "SHM_SIZE",
    "USER_NAME",
    "USER_PUBKEY",
    "USER_PUBKEY_FROM_GITHUB",
    "FRP_PORTS",
    "USE_HOST_TIMEDATE",
)
ADMIN_ONLY_KEYS = (
    "STACK_NAME",
    "USER_EMAIL",
    "STORAGE_NAME",
    "USER_TYPE",
    "USER_FULLNAME",
    "USER_MENTOR",
    "ALLOWED_NODES",
    "ADDITIONAL_DEVICE_GROUPS",
    "ADDITIONAL_PRIVATE_DATA_GROUPS",
    "ADDITIONAL_PRIVATE_DATA_MOUNT_GROUPS",
    "ADMIN_USER_ACCESS",
    "ENABLE_DOCKER_ACCESS",
    "RUN_PRIVILEGED",
    "DISABLED",
    "PURGE_USER_DATA",
    "EXTRA_ENVS",
)

_PORT = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "maximum": 65535},
        {"type": "string", "pattern": r"^[1-9][0-9]{0,4}$"},
    ]
}
_BOOL_OR_WORD = {"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["true", "false", "True", "False", "1", "0"]}]}

USER_SETTINGS_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://ccc-salt.example/schema/container-settings.schema.json",
    "title": "ccc-salt container settings (~/.containers/<STACK_NAME>.yml)",
    "description": "One top-level key, your STACK_NAME, mapping to the settings you may change.",
    "type": "object",
    "maxProperties": 1,
    "additionalProperties": {
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": {
            "CONTAINER_IMAGE": {
                "type": "string", "maxLength": 255, "pattern": IMAGE_PATTERN,
                "description": "Image to run; must match the cluster's image policy.",
            },
            "DEPLOYMENT_NODES": {
                "type": "array", "maxItems": 64, "uniqueItems": True,
                "items": {"type": "string", "pattern": NODE_NAME_PATTERN},
                "description": "Nodes to run on; each must be one you are allowed to use.",
            },
            "INSTALL_PACKAGES": {
                "type": "string", "maxLength": 4096, "pattern": PACKAGE_LIST_PATTERN,
                "description": "Space-separated apt packages installed at every container start.",
            },
            "INSTALL_REPOSITORY_KEYS": {
                "type": "string", "maxLength": 4096, "pattern": KEY_URL_LIST_PATTERN,
                "description": "Comma-separated https URLs of apt repository keys.",
            },
            "INSTALL_REPOSITORY_SOURCES": {
                "type": "string", "maxLength": 4096, "pattern": SOURCE_LIST_PATTERN,
                "description": "Comma-separated apt sources (ppa:owner/name or 'deb URL suite comp').",
            },
            "SHM_SIZE": {
                "oneOf": [
                    {"type": "string", "maxLength": 32, "pattern": SIZE_PATTERN},
                    {"type": "integer", "minimum": 1},
                ],
                "description": "Size of /dev/shm, e.g. 8g; at most the cluster maximum.",
            },
            "USER_NAME": {"type": "string", "pattern": USER_NAME_PATTERN, "description": "Linux user name."},
            "USER_PUBKEY": {
                "type": "string", "maxLength": 16384,
                "description": "OpenSSH public keys, one per line.",
            },
            "USER_PUBKEY_FROM_GITHUB": {
                "type": "string", "pattern": GITHUB_LOGIN_PATTERN,
                "description": "GitHub login whose public keys are added.",
            },
            "USE_HOST_TIMEDATE": {"type": "boolean", "description": "Use the node's time zone."},
            "FRP_PORTS": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "TCP": {"type": "array", "maxItems": 16, "uniqueItems": True, "items": _PORT},
                    "HTTP": {
                        "type": "array",
                        "maxItems": 16,
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["port", "subdomain"],
                            "properties": {
                                "port": _PORT,
                                "subdomain": {"type": "string", "pattern": SUBDOMAIN_PATTERN},
                                "pass": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": NO_CONTROL_CHARS},
                                "user": {"type": "string", "pattern": USER_NAME_PATTERN},
                                "health_check": _BOOL_OR_WORD,
                                "https_without_pass": {"type": "boolean"},
                                "subdomain_hostname_prefix": {"type": "boolean"},
                            },
                        },
                    },
                },
            },
        },
    },
}

RESERVED_USER_NAMES = frozenset(
    "root daemon bin sys sync games man lp mail news uucp proxy www-data backup list irc gnats "
    "nobody nogroup sshd messagebus systemd-network systemd-resolve systemd-timesync _apt "
    "admin docker ubuntu".split()
)


def __virtual__():
    if jsonschema is None:
        return False, "ccc_settings needs the jsonschema package (salt-pip install jsonschema)"
    return __virtualname__


class SettingsError(Exception):
    """The settings file could not be read or parsed; the message is meant for the user."""


class _NoAliasLoader(yaml.SafeLoader):
    """Safe loader that refuses YAML anchors/aliases, so a tiny file cannot expand to gigabytes."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not allowed in settings files", event.start_mark
            )
        return super().compose_node(parent, index)


def read_settings_file(path, max_bytes=MAX_SETTINGS_BYTES):
    """
    Read a user settings file without following symlinks.

    Returns the text, or ``None`` when the file does not exist. Raises ``SettingsError`` with a
    plain-language reason for symlinks, FIFOs, devices, directories, oversized or non-UTF-8 files.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.read_settings_file /data/users/a@b.org/container-settings/box.yml
    """
    name = os.path.basename(path)
    folder = os.path.dirname(path) or "."
    # The folder is user-controlled too (it sits in the user's rw /storage/user): open it without
    # following a symlink, then open the file relative to it.
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(folder):
            raise SettingsError(
                f"the folder {os.path.basename(folder)} is a symbolic link; it must be a real folder"
            ) from None
        raise SettingsError(f"the folder of {name} cannot be read ({os.strerror(exc.errno)})") from None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SettingsError(f"{name} is a symbolic link; it must be a regular file") from None
        raise SettingsError(f"{name} cannot be read ({os.strerror(exc.errno)})") from None
    finally:
        os.close(dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SettingsError(f"{name} is not a regular file")
        if info.st_size > max_bytes:
            raise SettingsError(f"{name} is {info.st_size} bytes; the limit is {max_bytes} bytes")
        data = os.read(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise SettingsError(f"{name} is larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SettingsError(f"{name} is not UTF-8 text") from None


def parse_settings_text(text, stack_name):
    """
    Parse settings text and return the mapping under ``stack_name`` (``{}`` when absent or empty).

    Raises ``SettingsError`` for YAML errors, aliases, a top level that is not a mapping, or
    other top-level keys.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.parse_settings_text 'box: {SHM_SIZE: 4g}' box
    """
    try:
        document = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - safe loader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SettingsError(f"the file is not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise SettingsError("the file is not valid here: its lists or mappings are nested too deeply") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise SettingsError(f"the file must be a mapping with the single key '{stack_name}:'")
    others = [str(key) for key in document if key != stack_name]
    if others:
        raise SettingsError(
            f"only the key '{stack_name}:' may appear at the top level; found {', '.join(sorted(others)[:5])}"
        )
    section = document.get(stack_name)
    return {} if section is None else section


def _schema_messages(section, stack_name):
    validator = _validator()
    messages = []
    for error in sorted(validator.iter_errors({stack_name: section}), key=lambda e: list(e.path)):
        path = ".".join(str(p) for p in list(error.path)[1:]) or stack_name
        if error.validator == "pattern":
            messages.append(f"{path}: the value {_short(error.instance)} is not allowed here")
        elif error.validator == "oneOf":
            messages.append(f"{path}: the value {_short(error.instance)} has the wrong type or form")
        elif error.validator == "additionalProperties":
            messages.append(f"{path}: {error.message}")
        elif error.validator == "type":
            messages.append(f"{path}: expected {error.validator_value}, got {_short(error.instance)}")
        else:
            messages.append(f"{path}: {error.message}")
    return messages


_VALIDATOR = []


def _validator():
    if not _VALIDATOR:
        cls = jsonschema.validators.validator_for(USER_SETTINGS_SCHEMA)
        _VALIDATOR.append(cls(USER_SETTINGS_SCHEMA))
    return _VALIDATOR[0]


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_size(value):
    """
    Convert a Docker size (``2g``, ``512MB``, ``1.5GiB`` or bytes) to bytes.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.parse_size 8g
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        return value
    match = re.match(SIZE_PATTERN, str(value).strip())
    if not match:
        raise ValueError(f"{value!r} is not a size such as 2g or 512m")
    number = float(re.match(r"[0-9.]+", value.strip()).group())
    unit = (match.group(2) or "b")[0].lower()
    return int(number * 1024 ** "bkmgt".index(unit))


def check_pubkeys(text):
    """
    Return the problems with newline-separated OpenSSH public keys (empty list when all are valid).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.check_pubkeys 'ssh-ed25519 AAAAC3Nza me@laptop'
    """
    problems = []
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if len(lines) > 32:
        problems.append("USER_PUBKEY: at most 32 keys are allowed")
    for number, line in enumerate(lines, 1):
        if not PUBKEY_LINE.match(line):
            problems.append(f"USER_PUBKEY: line {number} is not an OpenSSH public key")
    return problems


def effective_subdomains(subdomain, hostname_prefix, nodes):
    """
    The FRP subdomains an HTTP entry claims: ``<node>-<sub>`` per node, or ``<sub>`` unprefixed.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.effective_subdomains tb True '["node1", "node2"]'
    """
    if hostname_prefix:
        return [f"{node}-{subdomain}" for node in nodes]
    return [subdomain]


def truthy(value):
    """Interpret CCC's loose booleans (``true``, ``"True"``, ``1``...)."""
    return value is True or (isinstance(value, (str, int)) and str(value).lower() in ("true", "1", "yes"))


def validate_user_settings(section, stack_name, rules):
    """
    Validate the user's section of the settings file against the schema and the cluster rules.

    ``rules`` holds: ``allowed_nodes`` (list), ``cluster_nodes`` (list), ``image_prefixes``
    (list), ``shm_size_max`` (bytes), ``reserved_subdomains`` (list of names, ``{node}`` already
    expanded), ``taken_subdomains`` (dict subdomain -> other STACK_NAME); a rule left out is
    not checked. Returns a list of
    plain-language problems; an empty list means the section may be applied.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.validate_user_settings '{"SHM_SIZE": "4g"}' box '{"allowed_nodes": ["node1"]}'
    """
    if not isinstance(section, dict):
        return [f"'{stack_name}:' must contain settings (KEY: value lines), not {_short(section)}"]
    problems = []
    for key in section:
        if key in ADMIN_ONLY_KEYS:
            problems.append(f"{key} can only be set by the cluster administrators")
        elif key not in USER_SETTABLE_KEYS:
            problems.append(f"{_short(key)} is not a setting you can change")
    if problems:
        return problems
    # JSON-schema patterns end in "$", which Python also matches before a final newline; so
    # control characters are refused here, once, for every value (USER_PUBKEY is checked per line).
    problems.extend(_control_character_problems(
        {key: value for key, value in section.items() if key != "USER_PUBKEY"}, ""
    ))
    if problems:
        return problems
    problems.extend(_schema_messages(section, stack_name))
    if problems:
        return problems

    allowed_nodes = rules.get("allowed_nodes")
    for node in section.get("DEPLOYMENT_NODES", []) or []:
        if allowed_nodes is not None and node not in allowed_nodes:
            problems.append(
                f"DEPLOYMENT_NODES: you may not use node {node!r}; allowed: {', '.join(allowed_nodes) or 'none'}"
            )
    if "DEPLOYMENT_NODES" in section and not section["DEPLOYMENT_NODES"]:
        problems.append("DEPLOYMENT_NODES: list at least one node (remove the key to use your default nodes)")

    image = section.get("CONTAINER_IMAGE")
    prefixes = rules.get("image_prefixes")
    if image is not None and prefixes is not None and not any(image.startswith(prefix) for prefix in prefixes):
        problems.append(
            f"CONTAINER_IMAGE: {image!r} is not allowed; images must start with one of: {', '.join(prefixes)}"
        )

    if "SHM_SIZE" in section:
        size = parse_size(section["SHM_SIZE"])
        maximum = rules.get("shm_size_max")
        if maximum and size > maximum:
            problems.append(f"SHM_SIZE: {section['SHM_SIZE']} is more than the cluster maximum of {format_size(maximum)}")

    if section.get("USER_NAME") in RESERVED_USER_NAMES:
        problems.append(f"USER_NAME: {section['USER_NAME']!r} is reserved for the system")
    if "USER_PUBKEY" in section:
        problems.extend(check_pubkeys(section["USER_PUBKEY"]))

    problems.extend(_check_frp_ports(section.get("FRP_PORTS"), rules))
    return problems


_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


def _control_character_problems(value, path):
    if isinstance(value, str):
        if _CONTROL_CHARS.search(value):
            return [f"{path}: control characters (newlines, tabs, escapes) are not allowed in {_short(value)}"]
        return []
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _control_character_problems(item, f"{path}.{key}".lstrip("."))]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in _control_character_problems(item, f"{path}.{index}")]
    return []


def _check_frp_ports(frp_ports, rules):
    if not frp_ports:
        return []
    problems = []
    nodes = rules.get("cluster_nodes", [])
    reserved = set(rules.get("reserved_subdomains", []))
    taken = rules.get("taken_subdomains", {})
    seen = set()
    for entry in frp_ports.get("HTTP", []) or []:
        subdomain = entry["subdomain"]
        if subdomain in seen:
            problems.append(f"FRP_PORTS.HTTP: subdomain {subdomain!r} is listed twice")
        seen.add(subdomain)
        prefix = entry.get("subdomain_hostname_prefix", True)
        names = effective_subdomains(subdomain, prefix, nodes) + [subdomain]
        for name in names:
            if name in reserved:
                problems.append(f"FRP_PORTS.HTTP: subdomain {name!r} is reserved for cluster services")
                break
        # ``taken`` holds raw and node-prefixed names, so "node1-x" unprefixed clashes with "x" prefixed.
        clash = next((name for name in [subdomain] + names if name in taken), None)
        if clash is not None:
            shown = repr(subdomain) if clash == subdomain else f"{subdomain!r} (as {clash!r})"
            problems.append(f"FRP_PORTS.HTTP: subdomain {shown} is already used by another container")
        if entry.get("https_without_pass") and "pass" in entry:
            problems.append(f"FRP_PORTS.HTTP: 'pass' has no effect together with https_without_pass ({subdomain!r})")
    return problems


def format_size(size):
    """
    Format bytes the way users write sizes (``8g``, ``512m``).

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.format_size 8589934592
    """
    for unit in "tgmk":
        factor = 1024 ** ("bkmgt".index(unit))
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}b"


def schema():
    """
    Return the JSON schema of the user settings file.

    CLI Example:

    .. code-block:: bash

        salt-call --out=json ccc_settings.schema
    """
    return USER_SETTINGS_SCHEMA


def check_file(path, stack_name):
    """
    Read, parse and schema-check one settings file; report what a deploy would say about it.

    Cluster rules (nodes, image policy, SHM maximum, subdomains) are applied by
    ``ccc_containers.resolve``, which knows the container's user type.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.check_file /data/users/a@b.org/container-settings/box.yml box
    """
    try:
        text = read_settings_file(path)
        if text is None:
            return {"ok": True, "problems": [], "settings": None}
        section = parse_settings_text(text, stack_name)
    except SettingsError as exc:
        return {"ok": False, "problems": [str(exc)], "settings": None}
    problems = validate_user_settings(section, stack_name, {})
    return {"ok": not problems, "problems": problems, "settings": section}
