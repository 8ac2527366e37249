"""Hypothesis strategies for what users and imported files write: any YAML value, values shaped
like the settings schema's (so examples get past the schema and reach the cluster rules and the
spec), settings files as text (valid, broken and hostile YAML), and stat tuples. Bounded in size,
so an example costs milliseconds."""

import string

import yaml
from hypothesis import strategies as st

import ccc_schema  # noqa: E402  (support.site puts _utils on the path)

# Text a user can type, with what breaks things: control characters, braces (FRP and Jinja
# templates), YAML indicators, path separators, non-ASCII.
TRICKY = ["{{", "}}", "{%", "{#", "\n", "\r", "\t", "\x00", "\x1b", "\u2028", "..", "/", "\\", ":", "#", "&", "*",
          "!", "|", ">", "-", "'", '"', "@", "%", "~", "\u00e9", "\u202e"]
texts = st.one_of(
    st.text(max_size=24),
    st.lists(st.sampled_from(TRICKY) | st.text(string.ascii_lowercase + string.digits, max_size=6), max_size=6)
    .map("".join),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True), texts)
# Any value a YAML file (or JSON event data) can hold, small.
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
                      max_leaves=12)


def _pattern(pattern, max_size=None):
    found = st.from_regex(pattern, fullmatch=True)
    return found.filter(lambda text: len(text) <= max_size) if max_size else found


port_values = st.one_of(st.integers(-5, 70000), st.integers(1, 65535), st.integers(1, 65535).map(str),
                        _pattern(r"[1-9][0-9]{0,4}"), texts)
http_entries = st.fixed_dictionaries(
    {"port": port_values, "subdomain": st.one_of(_pattern(ccc_schema.SUBDOMAIN_PATTERN, 63), texts)},
    optional={"pass": st.one_of(st.text(min_size=1, max_size=20), texts), "user": st.one_of(
        _pattern(ccc_schema.USER_NAME_PATTERN, 32), texts), "health_check": st.one_of(st.booleans(), texts),
        "https_without_pass": st.booleans() | scalars, "subdomain_hostname_prefix": st.booleans() | scalars,
        "extra": values},
)
frp_ports = st.one_of(
    st.fixed_dictionaries({}, optional={"TCP": st.lists(port_values, max_size=4), "HTTP": st.lists(http_entries, max_size=3)}),
    values,
)
NODES = ["node1", "node2", "node3"]
# Per user-settable key: a value shaped like the schema's, or anything.
SHAPED = {
    "CONTAINER_IMAGE": st.sampled_from(["vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1", "vicoslab/ccc:other",
                                        "registry.example.org/ccc/x:1", "evil/image:latest"])
    | _pattern(ccc_schema.IMAGE_PATTERN, 255),
    "DEPLOYMENT_NODES": st.lists(st.sampled_from(NODES + ["node9", "Node1"]) | _pattern(ccc_schema.NODE_NAME_PATTERN, 63),
                                 max_size=4),
    "INSTALL_PACKAGES": _pattern(ccc_schema.PACKAGE_LIST_PATTERN, 200),
    "INSTALL_REPOSITORY_KEYS": _pattern(ccc_schema.KEY_URL_LIST_PATTERN, 200),
    "INSTALL_REPOSITORY_SOURCES": _pattern(ccc_schema.SOURCE_LIST_PATTERN, 300)
    | st.sampled_from(["deb [trusted=yes] https://x.org/ stable main", "deb http://x.org/ stable main",
                       "ppa:a/b", "deb [arch=amd64] https://x.org/ s c"]),
    "SHM_SIZE": _pattern(ccc_schema.SIZE_PATTERN, 32) | st.integers(-1, 2**50),
    "USER_NAME": _pattern(ccc_schema.USER_NAME_PATTERN, 32) | st.sampled_from(["root", "docker", "ana"]),
    "USER_PUBKEY": st.sampled_from(["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake x@y", "ssh-rsa AAAA\nbad line",
                                    "ecdsa-sha2-nistp256 AAAA= a {{ b }}"]),
    "USER_PUBKEY_FROM_GITHUB": _pattern(ccc_schema.GITHUB_LOGIN_PATTERN, 39),
    "USE_HOST_TIMEDATE": st.booleans(),
    "FRP_PORTS": frp_ports,
}
# Per user-settable key: a value the sample site's rules accept (or just miss: a port of 65536,
# a node not allowed, a size over the maximum), so whole sections get through to the spec.
edge_ports = st.sampled_from([1, 22, 65535, 65536, 99999, 0, "1", "65535", "65536", "99999", "0", "08"])
VALID = {
    "CONTAINER_IMAGE": st.sampled_from(["vicoslab/ccc:", "registry.example.org/ccc/x:"]).flatmap(
        lambda prefix: _pattern(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}").map(lambda tag: prefix + tag)),
    "DEPLOYMENT_NODES": st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True),
    "INSTALL_PACKAGES": _pattern(ccc_schema.PACKAGE_LIST_PATTERN, 100),
    "INSTALL_REPOSITORY_KEYS": _pattern(ccc_schema.KEY_URL_LIST_PATTERN, 100),
    "INSTALL_REPOSITORY_SOURCES": st.sampled_from(["ppa:a/b", "deb [arch=amd64] https://x.org/ s c",
                                                   "https://x.org/ubuntu stable main,ppa:c/d"]),
    "SHM_SIZE": st.sampled_from(["1g", "512m", "32g", "33g", "1.5GiB", 1024, "0"]),
    "USER_NAME": _pattern(ccc_schema.USER_NAME_PATTERN, 32),
    "USER_PUBKEY": st.just("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake x@y"),
    "USER_PUBKEY_FROM_GITHUB": _pattern(ccc_schema.GITHUB_LOGIN_PATTERN, 39),
    "USE_HOST_TIMEDATE": st.booleans(),
    "FRP_PORTS": st.fixed_dictionaries({}, optional={
        "TCP": st.lists(st.integers(1, 65535) | st.integers(1, 65535).map(str) | edge_ports, max_size=3, unique=True),
        "HTTP": st.lists(st.fixed_dictionaries(
            {"port": st.integers(1, 65535) | edge_ports, "subdomain": _pattern(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?")},
            optional={"pass": st.text(st.characters(min_codepoint=32, max_codepoint=0x2ff), min_size=1, max_size=12)
                      | st.sampled_from(["{{ .Envs.FRP_TOKEN }}", "a}}b", "{{x"]),
                      "user": _pattern(ccc_schema.USER_NAME_PATTERN, 32),
                      "health_check": st.sampled_from([True, False, "true", "0"]),
                      "subdomain_hostname_prefix": st.booleans()}), max_size=2)}),
}
ADMIN_ONLY = list(ccc_schema.ADMIN_ONLY_KEYS)
setting_keys = st.sampled_from(list(SHAPED)) | st.sampled_from(ADMIN_ONLY) | texts


@st.composite
def sections(draw, max_keys=5):
    """A settings section: user-settable keys with values the rules accept (a third of the
    sections), or schema-shaped values with sometimes an admin-only or unknown key or any value."""
    if draw(st.integers(0, 2)) == 0:
        keys = draw(st.lists(st.sampled_from(sorted(VALID)), max_size=max_keys, unique=True))
        return {key: draw(VALID[key]) for key in keys}
    section = {}
    for key in draw(st.lists(setting_keys, max_size=max_keys, unique=True)):
        section[key] = draw(SHAPED[key] | values) if key in SHAPED and draw(st.integers(0, 3)) else draw(values)
    return section


HOSTILE_YAML = [
    "a: &x [1]\nb: *x\n", "!!python/object/apply:os.system ['id']\n", "[[[[[[[[[[[[1]]]]]]]]]]]]\n",
    "{STACK}: !!binary aGk=\n", "{STACK}:\n  SHM_SIZE: 1" + "0" * 5000 + "\n", "{STACK}: 2001-13-45\n",
    "{STACK}:\n  USER_NAME: ana\n  USER_NAME: bob\n", "\t{STACK}: x\n", "{STACK}: {FRP_PORTS: {TCP: [22, 22]}}\n",
    "%YAML 1.1\n---\n{STACK}: {}\n...\n---\nx: 1\n", "{STACK}: {SHM_SIZE: .inf}\n", "? [a, b]\n: c\n",
]


def settings_texts(stack):
    """What a user's settings file may hold: a (mostly schema-shaped) section under the stack,
    any YAML document, a hostile YAML snippet, or any text."""
    dumped = sections().map(lambda section: yaml.safe_dump({stack: section}, allow_unicode=True))
    return st.one_of(dumped, dumped, dumped, values.map(yaml.safe_dump), st.sampled_from(HOSTILE_YAML).map(
        lambda text: text.replace("{STACK}", stack)), st.text(max_size=200))
