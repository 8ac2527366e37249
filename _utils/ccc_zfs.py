"""
The zfs role's rules: checking ``ccc:zfs`` (its shapes are the role's ``schema.yaml``; here what
compares values), the ``zpool create`` argument list, reading the tools' parsable output,
comparing a pool's layout and its properties, the disk probe's verdict and the module parameters
(ARC limits).

The role never destroys: no rule here ever produces ``zpool destroy``, ``zfs destroy``,
``labelclear`` or a forced (``-f``) create (the original destroyed and re-created pools whose
device check it misread). A pool or dataset marked ``state: absent`` is refused with the command
an admin would run by hand. Plain Python, no Salt imports.
"""

import re

import ccc_role_schema

# vdev types in pillar -> (status section, vdev type as zpool status names it, words before the disks)
TYPES = {"stripe": ("data", "disk"), "mirror": ("data", "mirror"), "raidz": ("data", "raidz1"),
         "raidz1": ("data", "raidz1"), "raidz2": ("data", "raidz2"), "raidz3": ("data", "raidz3"),
         "log": ("logs", "disk"), "cache": ("cache", "disk"), "spare": ("spares", "disk")}
SECTIONS = ("logs", "cache", "spares", "special", "dedup")
GROUP = re.compile(r"^(mirror|raidz[123]|draid[0-9]?[^-]*|replacing|spare|special)-[0-9]+$")
# Properties whose parsable (-p) value is a number of bytes; "none" reads back as 0.
SIZE_PROPERTIES = ("recordsize", "quota", "refquota", "reservation", "refreservation", "volsize",
                   "volblocksize", "special_small_blocks", "dnodesize_bytes")
UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
# Pool properties chosen at creation only (zpool get reads them back differently, e.g. ashift 0).
CREATE_ONLY = ("ashift",)
HEADER = "# Managed by ccc-salt (cluster role zfs): ZFS module parameters from ccc:zfs:module_parameters.\n"


def absent_message(kind, name):
    """What an admin reads for a pool or dataset pillar marks ``state: absent``."""
    command = f"zpool destroy {name}" if kind == "pool" else f"zfs destroy {name}"
    return (f"ccc:zfs: {kind} {name} is marked state: absent, but ccc-salt never destroys a {kind} "
            f"(its data would be lost). If you really mean it, run by hand: {command} "
            f"and then remove {name} from ccc:zfs")


def properties(value):
    """A property mapping the schema let through, as the tools take it: values as strings."""
    return {key: ("on" if item else "off") if isinstance(item, bool) else str(item)
            for key, item in (value or {}).items()}


def vdevs(pool, where):
    """A present pool's vdevs as ``[{"type": ..., "disks": [...]}]`` (``vdevs``, or ``type`` +
    ``disks``): known types, each type's least number of disks, and no disk twice."""
    items = pool.get("vdevs") or [{"type": pool.get("type") or "stripe", "disks": pool.get("disks")}]
    checked, seen = [], set()
    for index, item in enumerate(items):
        kind, disks = item.get("type") or "stripe", item.get("disks")
        if kind not in TYPES:
            raise ValueError(f"{where}:vdevs[{index}]: type {kind!r} is not one of {', '.join(TYPES)}")
        if not disks:
            raise ValueError(f"{where}:vdevs[{index}]: disks must be a non-empty list of device paths")
        for disk in disks:
            if disk in seen:
                raise ValueError(f"{where}: disk {disk} is named twice")
            seen.add(disk)
        minimum = {"mirror": 2, "raidz": 2, "raidz1": 2, "raidz2": 3, "raidz3": 4}.get(kind, 1)
        if len(disks) < minimum:
            raise ValueError(f"{where}:vdevs[{index}]: a {kind} needs at least {minimum} disks")
        checked.append({"type": "raidz1" if kind == "raidz" else kind, "disks": list(disks)})
    return checked


def _dataset(name, item, local_mounts, pools):
    """One dataset's properties, ``mount_point`` (a ccc:cluster:mount_points:local key) resolved."""
    where = f"ccc:zfs:datasets:{name}"
    if name.split("/")[0] not in pools:
        raise ValueError(f"{where}: its pool {name.split('/')[0]} is not in ccc:zfs:pools")
    props = properties(item.get("properties"))
    key = item.get("mount_point")
    if key is not None:
        path = (local_mounts or {}).get(key)
        if not (isinstance(path, str) and path.startswith("/")):
            raise ValueError(f"{where}:mount_point: {key!r} is not a key of ccc:cluster:mount_points:local")
        if props.get("mountpoint", path) != path:
            raise ValueError(f"{where}: mount_point {key} ({path}) and properties:mountpoint differ")
        props["mountpoint"] = path
    if "volsize" in props:
        raise ValueError(f"{where}: volumes (volsize) are not managed by this role; only file systems")
    return props


def plan(settings, schema, local_mounts=None):
    """
    ``ccc:zfs`` checked by the role's ``schema``, then the rules that compare values:
    ``{"problems": [...], "refused": [message], "pools": {name: {"vdevs", "properties",
    "pool_properties"}}, "datasets": {name: {"pool", "properties"}}, "parameters"}``. Datasets
    are sorted parents first; a malformed entry is a problem, never skipped silently.
    """
    result = {"problems": ccc_role_schema.problems("zfs", settings, schema), "refused": [], "pools": {},
              "datasets": {}, "parameters": {}}
    if result["problems"]:
        return result
    result["parameters"] = dict(settings.get("module_parameters") or {})
    low, high = result["parameters"].get("zfs_arc_min"), result["parameters"].get("zfs_arc_max")
    if low and high and low > high:
        result["problems"].append(f"ccc:zfs:module_parameters: zfs_arc_min ({low}) is above zfs_arc_max ({high})")
    pools, datasets, disks = settings.get("pools") or {}, settings.get("datasets") or {}, {}
    for name, item in pools.items():
        where = f"ccc:zfs:pools:{name}"
        if item.get("state") == "absent":
            result["refused"].append(absent_message("pool", name))
            continue
        try:
            pool = {"vdevs": vdevs(item, where), "properties": properties(item.get("properties")),
                    "pool_properties": properties(item.get("pool_properties"))}
            for disk in (d for v in pool["vdevs"] for d in v["disks"]):
                if disks.setdefault(disk, name) != name:
                    raise ValueError(f"{where}: disk {disk} is also in pool {disks[disk]}")
            result["pools"][name] = pool
        except ValueError as exc:
            result["problems"].append(str(exc))
    for name in sorted(datasets, key=lambda n: (n.count("/"), n)):
        item = datasets[name] or {}
        if item.get("state") == "absent":
            result["refused"].append(absent_message("dataset", name))
            continue
        try:
            result["datasets"][name] = {"pool": name.split("/")[0],
                                        "properties": _dataset(name, item, local_mounts, pools)}
        except ValueError as exc:
            result["problems"].append(str(exc))
    return result


def create_argv(name, pool):
    """``zpool create`` for a pool that does not exist: never ``-f`` (zpool then refuses disks
    that carry a file system or another pool's label on its own, after our probe did)."""
    argv = ["zpool", "create"]
    for key, value in pool.get("pool_properties", {}).items():
        argv += ["-o", f"{key}={value}"]
    for key, value in pool.get("properties", {}).items():
        argv += ["-O", f"{key}={value}"]
    argv.append(name)
    for vdev in sorted(pool["vdevs"], key=lambda v: TYPES[v["type"]][0] != "data"):
        if vdev["type"] != "stripe":
            argv.append(vdev["type"])
        argv += vdev["disks"]
    return argv


def parse_pool_list(text):
    """``zpool list -H -p -o name,health`` → ``{name: health}``."""
    pools = {}
    for line in (text or "").splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[0]:
            pools[fields[0]] = fields[1]
    return pools


def parse_name_list(text):
    """``zfs list -H -o name ...`` → the names, one a line."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def parse_get(text):
    """``zfs get``/``zpool get -H -p -o property,value`` → ``{property: value}``."""
    found = {}
    for line in (text or "").splitlines():
        fields = line.split("\t")
        if len(fields) >= 2:
            found[fields[0]] = fields[1]
    return found


def parse_status(text, pool):
    """
    The config tree of ``zpool status -P <pool>``: ``[{"section", "type", "devices"}]`` in the
    printed order. Sections: ``data`` and the pool's ``logs``/``cache``/``spares``/``special``/
    ``dedup``; type ``disk`` for a top-level disk, else the group's kind (``mirror``, ``raidz2``,
    ...). ``ValueError`` when the pool's config tree is not there.
    """
    lines = (text or "").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "config:")
    except StopIteration:
        raise ValueError(f"zpool status of {pool} has no config section") from None
    tree, section, group, seen_pool = [], None, None, False
    for line in lines[start + 1:]:
        if line.strip().startswith("errors:"):
            break
        if not line.strip() or line.split()[0] == "NAME":
            continue
        body = line.lstrip("\t")
        depth, name = (len(body) - len(body.lstrip(" "))) // 2, body.split()[0]
        if depth == 0:
            seen_pool = seen_pool or name == pool
            section, group = ("data" if name == pool else name), None
            continue
        if depth == 1 and GROUP.match(name):
            group = {"section": section, "type": name.rsplit("-", 1)[0], "devices": []}
            tree.append(group)
        elif depth == 1:
            group = None
            tree.append({"section": section, "type": "disk", "devices": [name]})
        elif group is not None:
            group["devices"].append(name)
        else:
            raise ValueError(f"zpool status of {pool}: unexpected line {line.strip()!r}")
    if not seen_pool:
        raise ValueError(f"zpool status has no config tree for pool {pool}")
    return tree


def wanted_layout(pool_vdevs):
    """The pillar's vdevs in ``parse_status``'s shape (a stripe is one ``disk`` vdev per disk)."""
    layout = []
    for vdev in pool_vdevs:
        section, kind = TYPES[vdev["type"]]
        if kind == "disk":
            layout += [{"section": section, "type": "disk", "devices": [disk]} for disk in vdev["disks"]]
        else:
            layout.append({"section": section, "type": kind, "devices": list(vdev["disks"])})
    return layout


def describe(layout):
    """A layout for people: ``mirror(/dev/sdb, /dev/sdc) + cache(/dev/sdd)``."""
    parts = []
    for vdev in layout:
        label = vdev["type"] if vdev["section"] == "data" else f"{vdev['section']} {vdev['type']}"
        parts.append(f"{label}({', '.join(vdev['devices'])})")
    return " + ".join(parts) or "nothing"


def layout_differences(wanted, actual, identify):
    """
    What differs between the pillar's layout and the pool's, ``[]`` when they match.
    ``identify(path)`` gives a path's device identities, its resolved device first and then, for
    a partition, its whole disk (a disk given whole to ZFS shows as its first partition). A
    pillar disk matches a pool device when its resolved device is one of the device's.
    """
    def canon(layout, pillar_side):
        keys = []
        for vdev in layout:
            devices = []
            for path in vdev["devices"]:
                ids = list(identify(path)) or [path]
                mine = [i for i in ids if i in wanted_ids]
                devices.append(ids[0] if pillar_side or not mine else mine[0])
            keys.append((vdev["section"], vdev["type"], tuple(sorted(devices))))
        return sorted(keys)
    wanted_ids = {(list(identify(p)) or [p])[0] for v in wanted for p in v["devices"]}
    want, have = canon(wanted, True), canon(actual, False)
    if want == have:
        return []
    missing = [k for k in want if k not in have]
    extra = [k for k in have if k not in want]
    text = lambda keys: ", ".join(f"{s + ' ' if s != 'data' else ''}{t}({', '.join(d)})" for s, t, d in keys)
    found = []
    if missing:
        found.append(f"pillar wants {text(missing)}, which the pool does not have")
    if extra:
        found.append(f"the pool has {text(extra)}, which pillar does not name")
    return found



def size_bytes(value):
    """``1M``/``4K``/``2T``/``1048576``/``none`` → bytes as a string (``none`` → ``0``), else None."""
    text = str(value).strip()
    if text.lower() == "none":
        return "0"
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*([BKMGTP]?)(?:i?B)?", text, re.IGNORECASE)
    if not match:
        return None
    return str(int(float(match.group(1)) * UNITS[match.group(2).upper()]))


def property_differences(wanted, actual):
    """``{property: {"old": ..., "new": ...}}`` for each wanted property the read value differs
    from; sizes compared in bytes (``zfs get -p``), other values as the tools print them."""
    found = {}
    for key, value in wanted.items():
        if key in CREATE_ONLY:
            continue
        have = actual.get(key)
        if key in SIZE_PROPERTIES:
            same = have is not None and size_bytes(value) == size_bytes(have)
        else:
            same = have is not None and str(value).lower() == str(have).lower()
        if not same:
            found[key] = {"old": have, "new": value}
    return found


def parse_probe(text):
    """``blkid -p -o export <disk>`` → ``{KEY: value}`` of the signatures found."""
    found = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key and key != "DEVNAME":
            found[key] = value
    return found


def probe_verdict(disk, returncode, text):
    """Why ``disk`` must not go into a new pool, or None when it is blank. ``blkid -p`` exits 2
    when it finds no signature at all; any signature (a ZFS label of an exported or destroyed
    pool, a file system, a partition table, RAID or LVM metadata) or a failed probe says no."""
    if returncode == 2:
        return None
    if returncode != 0:
        return f"disk {disk} could not be probed (blkid exited {returncode}); nothing is created on it"
    found = parse_probe(text)
    what = ", ".join(f"{key}={value}" for key, value in sorted(found.items()) if key in
                     ("TYPE", "PTTYPE", "LABEL", "UUID", "PART_ENTRY_TYPE", "USAGE")) or "a signature"
    return f"disk {disk} is not blank ({what}); ccc-salt never re-labels a disk: wipe it by hand if it is really free"


def modprobe_text(params):
    """``/etc/modprobe.d/zfs.conf`` for ``params`` (one options line per parameter)."""
    return HEADER + "".join(f"options zfs {key}={value}\n" for key, value in sorted(params.items()))


def live_order(params, current):
    """The order to write live parameters in: the ARC maximum first when the new minimum is above
    the running maximum (the kernel refuses a minimum above the maximum), else the minimum first."""
    names = sorted(params)
    high = current.get("zfs_arc_max")
    low_first = not (params.get("zfs_arc_min") and high and str(high).isdigit() and int(high)
                     and params["zfs_arc_min"] > int(high))
    names.sort(key=lambda n: {"zfs_arc_min": 0 if low_first else 2, "zfs_arc_max": 1}.get(n, 3))
    return names
