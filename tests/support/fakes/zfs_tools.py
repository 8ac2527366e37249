#!/usr/bin/env python3
"""FAKE zpool, zfs and blkid for tests (this machine has no ZFS and its disks are not ours).

Installed on PATH under the names zpool/zfs/blkid (``support.zfs_fakes``). It answers like
the real tools (OpenZFS 2.1 output shapes: ``list -H -p``, ``status -P``, ``get -H -p``,
``blkid -p -o export``) for the pools, datasets and disk signatures held in the JSON file
``$CCC_FAKE_ZFS_STATE``, changes that file as ``create``/``set`` would, and records every argv
as one JSON line in ``$CCC_FAKE_ZFS_LOG``. Like the real zpool, ``create`` without ``-f``
refuses a disk in a pool or with a signature. Commands the role must never run (destroy,
labelclear, ...) are recorded and answered with an error. ``state["fail"]`` maps a
"tool verb" to an error message, to drive error paths.
"""

import json
import os
import sys

SIZES = {"recordsize", "quota", "refquota", "reservation", "refreservation", "volsize"}
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
DATASET_DEFAULTS = {"compression": "off", "atime": "on", "recordsize": "131072", "quota": "0",
                    "xattr": "on", "logbias": "latency", "sync": "standard", "dedup": "off",
                    "primarycache": "all", "relatime": "off", "acltype": "off"}
POOL_DEFAULTS = {"ashift": "0", "autotrim": "off", "autoexpand": "off", "comment": "-"}


def out(text):
    sys.stdout.write(text)


def fail(message, code=1):
    sys.stderr.write(message + "\n")
    sys.exit(code)


def size(key, value):
    if key in SIZES and value[-1:].upper() in UNITS:
        return str(int(float(value[:-1]) * UNITS[value[-1].upper()]))
    return "0" if key in SIZES and value == "none" else value


def in_pool(state, device):
    real = os.path.realpath(device)
    for name, pool in state["pools"].items():
        if any(os.path.realpath(d) == real for v in pool["vdevs"] for d in v["devices"]):
            return name
    return None


def zpool_create(state, args):
    props, root, force = {}, {}, False
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag == "-f":
            force = True
        elif flag in ("-o", "-O"):
            key, _, value = args.pop(0).partition("=")
            (props if flag == "-o" else root)[key] = size(key, value)
    name, vdevs, section, group = args[0], [], "data", None
    for word in args[1:]:
        if word in ("mirror", "raidz", "raidz1", "raidz2", "raidz3"):
            group = {"section": section, "type": "raidz1" if word == "raidz" else word, "devices": []}
            vdevs.append(group)
        elif word in ("log", "cache", "spare"):
            section, group = {"log": "logs", "spare": "spares"}.get(word, word), None
        else:
            if not os.path.exists(word):
                fail(f"cannot open '{word}': no such device in /dev")
            used = in_pool(state, word)
            label = state["labels"].get(os.path.realpath(word))
            if not force and (used or label):
                fail(f"invalid vdev specification\nuse '-f' to override the following errors:\n{word} "
                     + (f"is part of active pool '{used}'" if used else f"contains a filesystem of type '{label}'"))
            if group is not None:
                group["devices"].append(word)
            else:
                vdevs.append({"section": section, "type": "disk", "devices": [word]})
    if name in state["pools"]:
        fail(f"cannot create '{name}': pool already exists")
    state["pools"][name] = {"health": "ONLINE", "vdevs": vdevs, "props": props}
    state["datasets"][name] = dict(root, mountpoint=root.get("mountpoint", "/" + name))


def zpool_status(state, args):
    name = args[-1]
    if name not in state["pools"]:
        fail(f"cannot open '{name}': no such pool")
    pool = state["pools"][name]
    lines = [f"  pool: {name}", f" state: {pool['health']}", "config:", "",
             "\tNAME        STATE     READ WRITE CKSUM", f"\t{name}  {pool['health']}  0 0 0"]
    counter, section = 0, "data"
    for vdev in pool["vdevs"]:
        if vdev["section"] != section:
            section = vdev["section"]
            lines.append(f"\t{section}")
        if vdev["type"] == "disk":
            lines.append(f"\t  {vdev['devices'][0]}  ONLINE  0 0 0")
            continue
        lines.append(f"\t  {vdev['type']}-{counter}  ONLINE  0 0 0")
        counter += 1
        lines += [f"\t    {device}  ONLINE  0 0 0" for device in vdev["devices"]]
    out("\n".join(lines + ["", "errors: No known data errors", ""]))


def get(values, defaults, args):
    names, target = args[-2].split(","), args[-1]
    if values is None:
        fail(f"cannot open '{target}': dataset does not exist")
    out("".join(f"{key}\t{values.get(key, defaults(key))}\n" for key in names))


def dataset_default(state, name):
    def lookup(key):
        parent = name.rsplit("/", 1)[0] if "/" in name else None
        if key == "mountpoint":
            return "/" + name
        if parent and key not in ("quota", "refquota"):
            return state["datasets"].get(parent, {}).get(key) or dataset_default(state, parent)(key)
        return DATASET_DEFAULTS.get(key, "-")
    return lookup


def zfs_create(state, args):
    props, parents = {}, False
    while args[0].startswith("-"):
        flag = args.pop(0)
        parents = parents or flag == "-p"
        if flag == "-o":
            key, _, value = args.pop(0).partition("=")
            props[key] = size(key, value)
    name = args[0]
    parts = name.split("/")
    if parts[0] not in state["pools"]:
        fail(f"cannot create '{name}': no such pool '{parts[0]}'")
    for depth in range(2, len(parts)):
        parent = "/".join(parts[:depth])
        if parent not in state["datasets"]:
            if not parents:
                fail(f"cannot create '{name}': parent does not exist")
            state["datasets"][parent] = {}
    if name in state["datasets"]:
        fail(f"cannot create '{name}': dataset already exists")
    state["datasets"][name] = props


def run(tool, args, state):
    verb = args[0] if args else ""
    if f"{tool} {verb}" in state.get("fail", {}):
        fail(state["fail"][f"{tool} {verb}"])
    if tool == "blkid":
        device = os.path.realpath(args[-1])
        used = in_pool(state, device)
        label = state["labels"].get(device)
        if not used and not label:
            sys.exit(2)
        out(f"DEVNAME={args[-1]}\n" + (f"LABEL={used}\nTYPE=zfs_member\nUSAGE=filesystem\n" if used
                                        else label + "\n" if "=" in label else f"TYPE={label}\n"))
    elif (tool, verb) == ("zpool", "list"):
        out("".join(f"{name}\t{pool['health']}\n" for name, pool in sorted(state["pools"].items())))
    elif (tool, verb) == ("zpool", "status"):
        zpool_status(state, args)
    elif (tool, verb) == ("zpool", "create"):
        zpool_create(state, args[1:])
    elif (tool, verb) == ("zpool", "get"):
        pool = state["pools"].get(args[-1])
        get(pool and pool["props"], POOL_DEFAULTS.get, args)
    elif verb == "set":
        key, _, value = args[1].partition("=")
        target = state["pools"][args[2]]["props"] if tool == "zpool" else state["datasets"][args[2]]
        target[key] = size(key, value)
    elif (tool, verb) == ("zfs", "list"):
        pool = args[-1]
        out("".join(f"{name}\n" for name in sorted(state["datasets"]) if name == pool or name.startswith(pool + "/")))
    elif (tool, verb) == ("zfs", "get"):
        get(state["datasets"].get(args[-1]), dataset_default(state, args[-1]), args)
    elif (tool, verb) == ("zfs", "create"):
        zfs_create(state, args[1:])
    else:
        fail(f"fake {tool}: {verb!r} is not something ccc-salt may run", 3)


def main():
    tool, args = os.path.basename(sys.argv[0]), [a for a in sys.argv[1:] if a != "--"]
    path = os.environ["CCC_FAKE_ZFS_STATE"]
    with open(os.environ["CCC_FAKE_ZFS_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps([tool] + sys.argv[1:]) + "\n")
    with open(path, encoding="utf-8") as handle:
        state = json.load(handle)
    for key in ("pools", "datasets", "labels"):
        state.setdefault(key, {})
    run(tool, args, state)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(state, handle)


if __name__ == "__main__":
    main()
