"""
The user settings schema and the cluster rules a settings section must obey (allowed nodes,
image policy, SHM maximum, reserved and taken subdomains, package sources, FRP ports).
The same schema is shipped as ``schema/container-settings.schema.json`` for editors, written by
``scripts/write-settings-schema`` (``schema_file_text``); the default settings file users get is
generated from it too (``ccc_report.default_settings_text``). Adding a key: docs/pillar.md.
"""

import importlib.util
import json
import re

import ccc_frp
import ccc_quote
import ccc_rules
import ccc_schema_verdict

# jsonschema is imported only when a document is not certainly valid (``_schema_messages``);
# without it the ccc_settings module is not loaded and says why.
JSONSCHEMA_INSTALLED = importlib.util.find_spec("jsonschema") is not None

# The schema's patterns (JSON-schema regexes: "$" also matches before a final newline, so
# control characters are refused separately, by ``_shape_problems``).
NO_CONTROL_CHARS = r"^[^\x00-\x1f\x7f]*$"
USER_NAME_PATTERN = r"^[a-z_][a-z0-9_-]{0,31}$"
SUBDOMAIN_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
NODE_NAME_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,62})$"
PACKAGE_LIST_PATTERN = r"^([a-z0-9][a-z0-9+.:=~_-]{0,127}( [a-z0-9][a-z0-9+.:=~_-]{0,127})*)?$"
_KEY_URL = r"https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/+-]*)?"
KEY_URL_LIST_PATTERN = rf"^({_KEY_URL}(,{_KEY_URL})*)?$"

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

# Who may set what: a user's file may hold only the keys of USER_SETTINGS_SCHEMA
# (USER_SETTABLE_KEYS, below it); these are pillar-only.
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

# A TCP port as a number or its digits: 1-65535 either way (the text form went up to 99999, and
# "99999" became the label frp.99999 and an exposed port Docker refuses).
PORT_TEXT_PATTERN = r"^([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$"
_PORT = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "maximum": 65535},
        {"type": "string", "maxLength": 5, "pattern": PORT_TEXT_PATTERN},
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
                "description": "GitHub login whose public keys are added; keys you add on GitHub later arrive "
                               "within the cluster's refresh time (10 minutes unless your admins changed it).",
            },
            "USE_HOST_TIMEDATE": {"type": "boolean", "description": "Use the node's time zone."},
            "FRP_PORTS": {
                "type": "object",
                "description": (
                    "Ports published through FRP, replacing the administrator's lists: TCP, a list of ports;"
                    " HTTP, a list of {port, subdomain, pass, user, health_check, https_without_pass,"
                    " subdomain_hostname_prefix}, served at <node>-<subdomain> unless the prefix is off."
                ),
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

# The keys a user's settings file may hold: the schema's, in its order (the one list; the default
# settings file, the editors' schema and docs/pillar.md's table follow it).
USER_SETTABLE_KEYS = tuple(USER_SETTINGS_SCHEMA["additionalProperties"]["properties"])


def user_setting(key):
    """The schema of user-settable ``key`` (its ``type``, ``description``, limits)."""
    return USER_SETTINGS_SCHEMA["additionalProperties"]["properties"][key]


def schema_file_text():
    """``schema/container-settings.schema.json``, the editors' copy of ``USER_SETTINGS_SCHEMA``
    (``scripts/write-settings-schema`` writes it; a unit test holds it to this text)."""
    return json.dumps(USER_SETTINGS_SCHEMA, indent=2, ensure_ascii=False) + "\n"


RESERVED_USER_NAMES = frozenset(
    "root daemon bin sys sync games man lp mail news uucp proxy www-data backup list irc gnats "
    "nobody nogroup sshd messagebus systemd-network systemd-resolve systemd-timesync _apt "
    "admin docker ubuntu".split()
)


_VALIDATOR = []  # built once, on first use


def _validator():
    """The compiled validator of ``USER_SETTINGS_SCHEMA`` (compiling costs more than a check)."""
    if not _VALIDATOR:
        import jsonschema  # pylint: disable=import-outside-toplevel  # 40 ms: see ccc_schema_verdict

        cls = jsonschema.validators.validator_for(USER_SETTINGS_SCHEMA)
        _VALIDATOR.append(cls(USER_SETTINGS_SCHEMA))
    return _VALIDATOR[0]


def _schema_messages(section, stack_name):
    """Schema problems in plain words; every user value is quoted by ``quote_value`` (jsonschema's
    own messages repeat whole values). Runs after ``_shape_problems``, so there are few. A
    section ``ccc_schema_verdict`` finds certainly valid has none, and jsonschema is not asked."""
    document = {stack_name: section}
    if ccc_schema_verdict.verdict(document, USER_SETTINGS_SCHEMA) is True:
        return []
    messages = []
    for error in sorted(_validator().iter_errors(document), key=lambda e: list(e.path)):
        path = ".".join(str(p) for p in list(error.path)[1:]) or stack_name
        shown = ccc_quote.quote_value(error.instance)
        if error.validator == "pattern":
            messages.append(f"{path}: the value {shown} is not allowed here")
        elif error.validator in ("oneOf", "enum", "minimum", "maximum"):
            messages.append(f"{path}: the value {shown} has the wrong type or form")
        elif error.validator == "additionalProperties":
            extra = [key for key in error.instance if key not in error.schema.get("properties", {})]
            verb = "was" if len(extra) == 1 else "were"
            messages.append(f"{path}: Additional properties are not allowed ({ccc_quote.quote_some(extra)} {verb} unexpected)")
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


def parse_size(value):
    """
    Convert a Docker size (``2g``, ``512MB``, ``1.5GiB`` or bytes) to bytes.
    """
    if isinstance(value, bool):
        raise ValueError(f"{ccc_quote.quote_value(value)} is not a size")
    if isinstance(value, int):
        return value
    match = re.match(SIZE_PATTERN, str(value).strip())
    if not match:
        raise ValueError(f"{ccc_quote.quote_value(value)} is not a size such as 2g or 512m")
    number = float(re.match(r"[0-9.]+", value.strip()).group())
    unit = (match.group(2) or "b")[0].lower()
    return int(number * 1024 ** "bkmgt".index(unit))


def check_pubkeys(text):
    """
    Return the problems with newline-separated OpenSSH public keys (empty list when all are valid).
    """
    problems = []
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if len(lines) > 32:
        problems.append("USER_PUBKEY: at most 32 keys are allowed")
    for number, line in enumerate(lines, 1):
        if not PUBKEY_LINE.match(line):
            problems.append(f"USER_PUBKEY: line {number} is not an OpenSSH public key")
    return problems


def served_subdomains(http, nodes):
    """
    The subdomains FRP serves for an ``FRP_PORTS.HTTP`` entry: ``<node>-<sub>`` for each of
    ``nodes`` unless ``subdomain_hostname_prefix`` is off (default on), then ``<sub>`` alone.
    """
    subdomain = str(http["subdomain"])
    if ccc_rules.truthy(http.get("subdomain_hostname_prefix", True)):
        return [f"{node}-{subdomain}" for node in nodes]
    return [subdomain]


def validate_user_settings(section, stack_name, rules):
    """
    Validate the user's section of the settings file against the schema and the cluster rules.

    ``rules`` holds: ``allowed_nodes`` (list), ``cluster_nodes`` (list), ``image_prefixes``
    (list), ``shm_size_max`` (bytes), ``reserved_subdomains`` (list of names, ``{node}`` already
    expanded), ``taken_subdomains`` (a mapping subdomain -> other STACK_NAME); a rule left out is
    not checked. Returns a list of plain-language problems, at most ``MAX_PROBLEMS`` and a
    count of the rest; an empty list means the section may be applied. The cheap checks run
    first and the schema only sees bounded input, so any file costs milliseconds.
    """
    if not isinstance(section, dict):
        return [f"'{stack_name}:' must contain settings (KEY: value lines), not {ccc_quote.quote_value(section)}"]
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
            return ccc_quote.cap_problems(problems)
    return []


def _key_problems(section):
    problems = []
    for key in section:
        if key in ADMIN_ONLY_KEYS:
            problems.append(f"{key} can only be set by the cluster administrators")
        elif key not in USER_SETTABLE_KEYS:
            problems.append(f"{ccc_quote.quote_value(key)} is not a setting you can change")
    return problems


def _rule_problems(section, rules):
    """The cluster's rules for a section that passed the schema."""
    problems = []
    allowed_nodes = rules.get("allowed_nodes")
    for node in section.get("DEPLOYMENT_NODES", []) or []:
        if allowed_nodes is not None and node not in allowed_nodes:
            problems.append(
                f"DEPLOYMENT_NODES: you may not use node {ccc_quote.quote_value(node)}; allowed: {', '.join(allowed_nodes) or 'none'}"
            )
    if "DEPLOYMENT_NODES" in section and not section["DEPLOYMENT_NODES"]:
        problems.append("DEPLOYMENT_NODES: list at least one node (remove the key to use your default nodes)")

    image = section.get("CONTAINER_IMAGE")
    prefixes = rules.get("image_prefixes")
    if image is not None and prefixes is not None and not any(image.startswith(prefix) for prefix in prefixes):
        problems.append(
            f"CONTAINER_IMAGE: {ccc_quote.quote_value(image)} is not allowed; images must start with one of: {', '.join(prefixes)}"
        )

    if "SHM_SIZE" in section:
        size = parse_size(section["SHM_SIZE"])
        maximum = rules.get("shm_size_max")
        if maximum and size > maximum:
            problems.append(
                f"SHM_SIZE: {ccc_quote.quote_value(section['SHM_SIZE'])} is more than the cluster maximum of {format_size(maximum)}"
            )

    if section.get("USER_NAME") in RESERVED_USER_NAMES:
        problems.append(f"USER_NAME: {ccc_quote.quote_value(section['USER_NAME'])} is reserved for the system")
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
            return [f"{path}: the value {ccc_quote.quote_value(value)} is too long (at most {schema['maxLength']} characters)"]
        if path not in _MULTILINE_KEYS and _CONTROL_CHARS.search(value):
            return [f"{path}: control characters (newlines, tabs, escapes) are not allowed in {ccc_quote.quote_value(value)}"]
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
                    f"INSTALL_REPOSITORY_SOURCES: the option {ccc_quote.quote_value(option)} turns off apt's signature checks; it is not allowed"
                )
            elif name not in SOURCE_OPTIONS:
                problems.append(
                    f"INSTALL_REPOSITORY_SOURCES: the option {ccc_quote.quote_value(option)} is not allowed; "
                    f"allowed: {', '.join(o + '=' for o in SOURCE_OPTIONS)}"
                )
        if head.group("scheme").lower() not in SOURCE_SCHEMES:
            problems.append(
                f"INSTALL_REPOSITORY_SOURCES: the source {ccc_quote.quote_value(entry.strip())} is not allowed; "
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
        quoted = ccc_quote.quote_value(subdomain)
        if subdomain in seen:
            problems.append(f"FRP_PORTS.HTTP: subdomain {quoted} is listed twice")
        seen.add(subdomain)
        names = served_subdomains(entry, nodes) + [subdomain]
        for name in names:
            if name in reserved:
                problems.append(f"FRP_PORTS.HTTP: subdomain {ccc_quote.quote_value(name)} is reserved for cluster services")
                break
        # ``taken`` holds raw and node-prefixed names, so "node1-x" unprefixed clashes with "x" prefixed.
        clash = next((name for name in [subdomain] + names if name in taken), None)
        if clash is not None:
            shown = quoted if clash == subdomain else f"{quoted} (as {ccc_quote.quote_value(clash)})"
            problems.append(f"FRP_PORTS.HTTP: subdomain {shown} is already used by another container")
        if ccc_rules.truthy(entry.get("https_without_pass")) and "pass" in entry:
            problems.append(f"FRP_PORTS.HTTP: 'pass' has no effect together with https_without_pass ({quoted})")
        problems.extend(_template_problems(entry, quoted))
    return problems


def _template_problems(entry, quoted):
    """frpc expands ``{{ ... }}`` in its config (where the labels land): a user's ``pass`` or
    ``user`` with braces would read frpc's own environment or break the config for every user."""
    return [f"FRP_PORTS.HTTP: '{key}' of subdomain {quoted} must not contain '{{{{' or '}}}}' "
            "(the FRP client reads them as a template)"
            for key in ("user", "pass") if ccc_frp.has_template(entry.get(key))]


def format_size(size):
    """
    Format bytes the way users write sizes (``8g``, ``512m``).
    """
    for unit in "tgmk":
        factor = 1024 ** ("bkmgt".index(unit))
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}b"
