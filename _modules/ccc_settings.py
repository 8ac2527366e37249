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
# Bounds checked before any schema validation, so a hostile file costs milliseconds: jsonschema
# validates (and reports) every item of an oversized list, and uniqueItems is quadratic.
MAX_VALUES = 1024  # keys, scalars, lists and mappings in the whole file (a full file has ~400)
MAX_DEPTH = 8  # nested lists/mappings, the top level included (settings need 5)
MAX_PROBLEMS = 5  # problems reported per file; the rest are counted
QUOTE_CHARS = 80  # characters of a user's value quoted in a message
NO_CONTROL_CHARS = r"^[^\x00-\x1f\x7f]*$"
USER_NAME_PATTERN = r"^[a-z_][a-z0-9_-]{0,31}$"
SUBDOMAIN_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
NODE_NAME_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,62})$"
PACKAGE_LIST_PATTERN = r"^([a-z0-9][a-z0-9+.:=~_-]{0,127}( [a-z0-9][a-z0-9+.:=~_-]{0,127})*)?$"
KEY_URL_LIST_PATTERN = r"^(https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/+-]*)?(,https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/+-]*)?)*)?$"
# apt sources: https or ppa only, and only options that keep apt's signature checks on
# (trusted=, allow-insecure=, allow-weak=, allow-downgrade-to-insecure= turn them off).
SOURCE_SCHEMES = ("https", "ppa")
SOURCE_OPTIONS = ("arch", "lang", "target", "signed-by", "pdiffs", "by-hash")
INSECURE_SOURCE_OPTIONS = ("trusted", "allow-insecure", "allow-weak", "allow-downgrade-to-insecure")
_SOURCE_OPTION = rf"({'|'.join(SOURCE_OPTIONS)})[+-]?=[A-Za-z0-9_./-]+"
SOURCE_ENTRY = (
    r"(ppa:[A-Za-z0-9.+_-]+/[A-Za-z0-9.+_-]+"
    rf"|(deb (\[{_SOURCE_OPTION}( {_SOURCE_OPTION})*\] )?)?https://[A-Za-z0-9.:/_~%+-]+( [A-Za-z0-9._/-]+)*)"
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
    "HARDENING",
)

_PORT = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "maximum": 65535},
        {"type": "string", "maxLength": 5, "pattern": r"^[1-9][0-9]{0,4}$"},
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
                "items": {"type": "string", "maxLength": 63, "pattern": NODE_NAME_PATTERN},
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
                "description": (
                    "Comma-separated apt sources: ppa:owner/name or 'deb [options] https://URL suite comp'; "
                    "https only, options " + ", ".join(f"{o}=" for o in SOURCE_OPTIONS) + " only."
                ),
            },
            "SHM_SIZE": {
                "oneOf": [
                    {"type": "string", "maxLength": 32, "pattern": SIZE_PATTERN},
                    {"type": "integer", "minimum": 1},
                ],
                "description": "Size of /dev/shm, e.g. 8g; at most the cluster maximum.",
            },
            "USER_NAME": {"type": "string", "maxLength": 32, "pattern": USER_NAME_PATTERN, "description": "Linux user name."},
            "USER_PUBKEY": {
                "type": "string", "maxLength": 16384,
                "description": "OpenSSH public keys, one per line.",
            },
            "USER_PUBKEY_FROM_GITHUB": {
                "type": "string", "maxLength": 39, "pattern": GITHUB_LOGIN_PATTERN,
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
                                "subdomain": {"type": "string", "maxLength": 63, "pattern": SUBDOMAIN_PATTERN},
                                "pass": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": NO_CONTROL_CHARS},
                                "user": {"type": "string", "maxLength": 32, "pattern": USER_NAME_PATTERN},
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


# libyaml parses a 64 KiB file ~7x faster than pure Python; both are safe loaders.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _where(mark):
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""


def _check_yaml_events(text):
    """
    Refuse, from the parser's events and before anything is built, what makes a small file
    expensive: aliases (a tiny file expanding to gigabytes), deep nesting and more than
    ``MAX_VALUES`` values. Stops at the first excess, so the rest of the file is never parsed.
    """
    try:
        _walk_yaml_events(yaml.parse(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        # libyaml's own nesting limit (1000 levels), met while it looks ahead in "[[[[...".
        if "nesting depth" in str(getattr(exc, "problem", "")):
            raise SettingsError(_too_deep(getattr(exc, "problem_mark", None))) from None
        raise


def _too_deep(mark):
    return (
        "the file is not valid here: its lists or mappings are nested too deeply"
        f" (more than {MAX_DEPTH} levels){_where(mark)}"
    )


def _walk_yaml_events(events):
    depth = values = 0
    for event in events:
        if isinstance(event, yaml.AliasEvent):
            raise SettingsError(f"YAML aliases (*name) are not allowed in settings files{_where(event.start_mark)}")
        if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
            values += 1
            if values > MAX_VALUES:
                raise SettingsError(
                    f"the file holds more than {MAX_VALUES} values (keys, list items and settings)"
                    f"{_where(event.start_mark)}; settings files are short"
                )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise SettingsError(_too_deep(event.start_mark))
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


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
    # O_PATH first: it never opens a device (a planted watchdog node must not be opened by
    # root) and never blocks on a FIFO; only a regular file is then re-opened for reading,
    # through /proc/self/fd, so it is the very inode that was checked.
    try:
        path_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(f"{name} cannot be read ({os.strerror(exc.errno)})") from None
    finally:
        os.close(dir_fd)
    try:
        info = os.fstat(path_fd)
        if stat.S_ISLNK(info.st_mode):
            raise SettingsError(f"{name} is a symbolic link; it must be a regular file")
        if not stat.S_ISREG(info.st_mode):
            raise SettingsError(f"{name} is not a regular file")
        if info.st_size > max_bytes:
            raise SettingsError(f"{name} is {info.st_size} bytes; the limit is {max_bytes} bytes")
        fd = os.open(f"/proc/self/fd/{path_fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    finally:
        os.close(path_fd)
    try:
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

    Raises ``SettingsError`` for YAML errors, aliases, too many values, deep nesting, a top
    level that is not a mapping, or other top-level keys.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.parse_settings_text 'box: {SHM_SIZE: 4g}' box
    """
    try:
        _check_yaml_events(text)
        document = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SettingsError(f"the file is not valid YAML{_where(mark)}: {_clip(problem)}") from None
    except (ValueError, OverflowError) as exc:  # int("1" * 5000), a timestamp such as 2001-13-45
        raise SettingsError(f"the file is not valid YAML: a value cannot be read ({_clip(str(exc))})") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise SettingsError(f"the file must be a mapping with the single key '{stack_name}:'")
    others = [key for key in document if key != stack_name]
    if others:
        raise SettingsError(
            f"only the key '{stack_name}:' may appear at the top level; found "
            + ", ".join(quote_value(key) for key in sorted(others, key=str)[:MAX_PROBLEMS])
            + (f" and {len(others) - MAX_PROBLEMS} more" if len(others) > MAX_PROBLEMS else "")
        )
    section = document.get(stack_name)
    return {} if section is None else section


def _schema_messages(section, stack_name):
    """Schema problems in plain words; every user value is quoted by ``quote_value`` (jsonschema's
    own messages repeat whole values). Runs after ``_shape_problems``, so there are few."""
    messages = []
    for error in sorted(_validator().iter_errors({stack_name: section}), key=lambda e: list(e.path)):
        path = ".".join(str(p) for p in list(error.path)[1:]) or stack_name
        shown = quote_value(error.instance)
        if error.validator == "pattern":
            messages.append(f"{path}: the value {shown} is not allowed here")
        elif error.validator in ("oneOf", "enum", "minimum", "maximum"):
            messages.append(f"{path}: the value {shown} has the wrong type or form")
        elif error.validator == "additionalProperties":
            extra = [key for key in error.instance if key not in error.schema.get("properties", {})]
            names = ", ".join(quote_value(key) for key in extra[:MAX_PROBLEMS])
            names += f" and {len(extra) - MAX_PROBLEMS} more" if len(extra) > MAX_PROBLEMS else ""
            verb = "was" if len(extra) == 1 else "were"
            messages.append(f"{path}: Additional properties are not allowed ({names} {verb} unexpected)")
        elif error.validator == "type":
            messages.append(f"{path}: expected {error.validator_value}, got {shown}")
        elif error.validator == "required":
            messages.append(f"{path}: {error.message}")  # names a schema property, not user data
        elif error.validator == "uniqueItems":
            messages.append(f"{path}: the list has repeated items")
        elif error.validator in ("minLength", "maxLength", "maxItems"):
            messages.append(f"{path}: the value {shown} is too {'short' if error.validator == 'minLength' else 'long'}")
        else:
            messages.append(f"{path}: the value {shown} breaks the rule {error.validator}={error.validator_value!r}")
    return messages


_VALIDATOR = []


def _validator():
    if not _VALIDATOR:
        cls = jsonschema.validators.validator_for(USER_SETTINGS_SCHEMA)
        _VALIDATOR.append(cls(USER_SETTINGS_SCHEMA))
    return _VALIDATOR[0]


def _clip(text, limit=QUOTE_CHARS):
    """``text`` cut to ``limit`` characters, then "…" and its length (``quote_value``'s format)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def quote_value(value, limit=QUOTE_CHARS):
    """
    Quote a user's value for a message: its ``repr``, at most ``limit`` characters of the value,
    then "…" and the full length. Every message that echoes a user's value goes through this, so
    a hostile value never makes a message (or the ``.deploy`` report) large.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.quote_value "$(printf 'x%.0s' {1..500})"
    """
    if isinstance(value, str):
        return repr(value) if len(value) <= limit else f"{value[:limit]!r}… ({len(value)} characters)"
    return _clip(repr(value), limit)


def cap_problems(problems, limit=MAX_PROBLEMS):
    """
    The first ``limit`` problems, then "… and N more problems": a file with thousands of
    mistakes gets a short, readable report.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.cap_problems '["a", "b", "c"]' 2
    """
    problems = list(problems)
    if len(problems) <= limit:
        return problems
    return problems[:limit] + [f"… and {len(problems) - limit} more problems"]


def parse_size(value):
    """
    Convert a Docker size (``2g``, ``512MB``, ``1.5GiB`` or bytes) to bytes.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.parse_size 8g
    """
    if isinstance(value, bool):
        raise ValueError(f"{quote_value(value)} is not a size")
    if isinstance(value, int):
        return value
    match = re.match(SIZE_PATTERN, str(value).strip())
    if not match:
        raise ValueError(f"{quote_value(value)} is not a size such as 2g or 512m")
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
    not checked. Returns a list of plain-language problems, at most ``MAX_PROBLEMS`` and a
    count of the rest; an empty list means the section may be applied. The cheap checks run
    first and the schema only sees bounded input, so any file costs milliseconds.

    CLI Example:

    .. code-block:: bash

        salt-call ccc_settings.validate_user_settings '{"SHM_SIZE": "4g"}' box '{"allowed_nodes": ["node1"]}'
    """
    if not isinstance(section, dict):
        return [f"'{stack_name}:' must contain settings (KEY: value lines), not {quote_value(section)}"]
    steps = (
        lambda: _key_problems(section),
        lambda: _shape_problems(section, USER_SETTINGS_SCHEMA["additionalProperties"], ""),
        lambda: _source_problems(section.get("INSTALL_REPOSITORY_SOURCES")),
        lambda: _schema_messages(section, stack_name),
        lambda: _rule_problems(section, rules),
    )
    for step in steps:  # each step relies on the ones before it having found nothing
        problems = step()
        if problems:
            return cap_problems(problems)
    return []


def _key_problems(section):
    problems = []
    for key in section:
        if key in ADMIN_ONLY_KEYS:
            problems.append(f"{key} can only be set by the cluster administrators")
        elif key not in USER_SETTABLE_KEYS:
            problems.append(f"{quote_value(key)} is not a setting you can change")
    return problems


def _rule_problems(section, rules):
    """The cluster's rules for a section that passed the schema."""
    problems = []
    allowed_nodes = rules.get("allowed_nodes")
    for node in section.get("DEPLOYMENT_NODES", []) or []:
        if allowed_nodes is not None and node not in allowed_nodes:
            problems.append(
                f"DEPLOYMENT_NODES: you may not use node {quote_value(node)}; allowed: {', '.join(allowed_nodes) or 'none'}"
            )
    if "DEPLOYMENT_NODES" in section and not section["DEPLOYMENT_NODES"]:
        problems.append("DEPLOYMENT_NODES: list at least one node (remove the key to use your default nodes)")

    image = section.get("CONTAINER_IMAGE")
    prefixes = rules.get("image_prefixes")
    if image is not None and prefixes is not None and not any(image.startswith(prefix) for prefix in prefixes):
        problems.append(
            f"CONTAINER_IMAGE: {quote_value(image)} is not allowed; images must start with one of: {', '.join(prefixes)}"
        )

    if "SHM_SIZE" in section:
        size = parse_size(section["SHM_SIZE"])
        maximum = rules.get("shm_size_max")
        if maximum and size > maximum:
            problems.append(
                f"SHM_SIZE: {quote_value(section['SHM_SIZE'])} is more than the cluster maximum of {format_size(maximum)}"
            )

    if section.get("USER_NAME") in RESERVED_USER_NAMES:
        problems.append(f"USER_NAME: {quote_value(section['USER_NAME'])} is reserved for the system")
    if "USER_PUBKEY" in section:
        problems.extend(check_pubkeys(section["USER_PUBKEY"]))

    problems.extend(_check_frp_ports(section.get("FRP_PORTS"), rules))
    return problems


_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
_MULTILINE_KEYS = ("USER_PUBKEY",)  # checked line by line by check_pubkeys
_JSON_TYPES = (  # bool before int: True is an int in Python, a boolean in JSON
    (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"), (dict, "object"),
)


def _shape_problems(value, schema, path):
    """
    The sizes the schema allows (``maxItems``, ``maxLength``) and control characters, checked by
    one walk along the schema before jsonschema runs: jsonschema validates and reports every
    item of an oversized list (``uniqueItems`` is quadratic), this walk refuses the list without
    looking inside. Keys the schema does not know are not entered; the schema refuses them.
    Control characters are refused here because JSON-schema patterns end in "$", which Python
    also matches before a final newline.
    """
    kind = next((name for cls, name in _JSON_TYPES if isinstance(value, cls)), None)
    schema = next((branch for branch in schema.get("oneOf", ()) if branch.get("type") == kind), schema)
    if kind == "string":
        if len(value) > schema.get("maxLength", len(value)):
            return [f"{path}: the value {quote_value(value)} is too long (at most {schema['maxLength']} characters)"]
        if path not in _MULTILINE_KEYS and _CONTROL_CHARS.search(value):
            return [f"{path}: control characters (newlines, tabs, escapes) are not allowed in {quote_value(value)}"]
    elif kind == "array":
        if len(value) > schema.get("maxItems", len(value)):
            return [f"{path}: the list is too long ({len(value)} items; at most {schema['maxItems']})"]
        return [p for index, item in enumerate(value) for p in _shape_problems(item, schema.get("items", {}), f"{path}.{index}")]
    elif kind == "object":
        known, extra = schema.get("properties", {}), schema.get("additionalProperties")
        return [
            p for key, item in value.items() if key in known or isinstance(extra, dict)
            for p in _shape_problems(item, known.get(key, extra), f"{path}.{key}".lstrip("."))
        ]
    return []


_SOURCE_HEAD = re.compile(r"^(deb\s+(\[(?P<options>[^\]]*)\]\s+)?)?(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):")


def _source_problems(sources):
    """
    Why apt sources break the repository policy, in the words a pattern cannot give: apt must
    keep checking signatures (only ``SOURCE_OPTIONS``; ``trusted=yes`` and the ``allow-*``
    options turn the checks off) and sources are https:// or ppa: (plain http:// can be altered
    on the way). The schema's pattern, built from the same constants, refuses them too.
    """
    if not isinstance(sources, str):
        return []
    problems = []
    for entry in sources.split(","):
        head = _SOURCE_HEAD.match(entry.strip())
        if head is None:
            continue  # not shaped like a source: the schema says so
        for option in (head.group("options") or "").split():
            name = re.split(r"[+-]?=", option, maxsplit=1)[0]
            if name.lower() in INSECURE_SOURCE_OPTIONS:
                problems.append(
                    f"INSTALL_REPOSITORY_SOURCES: the option {quote_value(option)} turns off apt's signature checks; it is not allowed"
                )
            elif name not in SOURCE_OPTIONS:
                problems.append(
                    f"INSTALL_REPOSITORY_SOURCES: the option {quote_value(option)} is not allowed; "
                    f"allowed: {', '.join(o + '=' for o in SOURCE_OPTIONS)}"
                )
        if head.group("scheme").lower() not in SOURCE_SCHEMES:
            problems.append(
                f"INSTALL_REPOSITORY_SOURCES: the source {quote_value(entry.strip())} is not allowed; "
                "sources must be https:// URLs or ppa:owner/name (plain http:// is refused)"
            )
    return problems


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
        quoted = quote_value(subdomain)
        if subdomain in seen:
            problems.append(f"FRP_PORTS.HTTP: subdomain {quoted} is listed twice")
        seen.add(subdomain)
        prefix = entry.get("subdomain_hostname_prefix", True)
        names = effective_subdomains(subdomain, prefix, nodes) + [subdomain]
        for name in names:
            if name in reserved:
                problems.append(f"FRP_PORTS.HTTP: subdomain {quote_value(name)} is reserved for cluster services")
                break
        # ``taken`` holds raw and node-prefixed names, so "node1-x" unprefixed clashes with "x" prefixed.
        clash = next((name for name in [subdomain] + names if name in taken), None)
        if clash is not None:
            shown = quoted if clash == subdomain else f"{quoted} (as {quote_value(clash)})"
            problems.append(f"FRP_PORTS.HTTP: subdomain {shown} is already used by another container")
        if entry.get("https_without_pass") and "pass" in entry:
            problems.append(f"FRP_PORTS.HTTP: 'pass' has no effect together with https_without_pass ({quoted})")
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
