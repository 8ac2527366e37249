"""
What a container deployed by ccc-salt from a migrated inventory does differently from the one
the original playbook made from the same inventory (ccc-ansible-behaviour.md §3), and why. The
migration report lists every item; tests/integration/test_migrate_roundtrip.py compares each
migrated container with the original's, key by key, and accepts exactly these differences
(by ``id``).
"""

DIFFERENCES = [
    {"id": "nvidia-visible-devices", "what": "env NVIDIA_VISIBLE_DEVICES is always set (the GPU UUIDs, or void)",
     "why": "with no device group the original left the image's value (all GPUs in CUDA images) in charge"},
    {"id": "no-gpu-group-means-no-gpu", "what": "a node without compute_devices gives no GPU (no device request)",
     "why": "the original's null compute_devices meant no restriction, i.e. every GPU of the node"},
    {"id": "welcome-message", "what": "env CONTAINER_WELCOME_MSG is ccc-salt's text",
     "why": "it names the right settings path (~/.containers, the original wrote ~/.container) and no error of another container leaks into it; problems go to ~/.containers/<STACK>.deploy"},
    {"id": "sshd-host-keys", "what": "/home/.sshd is <sshd_data>/stacks/<STACK_NAME>, read-only",
     "why": "the original shared one writable host key folder (<sshd_data>/.sshd) between every container of a node; each container now has its own keys, kept when it moves (users see a host key change once)"},
    {"id": "admin-logs", "what": "ADMIN_USER_ACCESS mounts ccc:cluster:admin_log_dir (/var/log/ccc-salt) at /storage/admin/logs-<node>",
     "why": "there is no nightwatch and so no /var/log/container-nightwatch"},
    {"id": "private-propagation", "what": "/storage/private is always bound with rslave propagation",
     "why": "the original kept rshared for containers made before live private mounts existed; rslave keeps mounts from propagating back to the host"},
    {"id": "management-labels", "what": "labels ccc.managed-by, ccc.stack and ccc.spec-hash are added; frp.* labels an image declares but the admin did not grant are voided",
     "why": "ccc-salt acts only on containers it created and compares one hash instead of the whole spec; an image cannot publish ports through FRP on its own"},
    {"id": "frp-health-check", "what": "frp.<port>.health_check is exactly true or false",
     "why": "the original copied the admin's value verbatim (a YAML boolean became True/False)"},
    {"id": "hardening", "what": "no-new-privileges, cap_drop [MKNOD, NET_RAW, SETFCAP] and a pids limit (ccc:cluster:hardening)",
     "why": "a user who is root in the container cannot spoof ARP on shared bridges or fork-bomb the node; RUN_PRIVILEGED still turns it off"},
    {"id": "image-pull", "what": "with ccc:cluster:image_policy:pull: always (compute_container_image_pull_always) a container is recreated only when the id its image's tag points to changed, and .deploy says 'image updated: <old> -> <new>'; a failed re-pull keeps the node's copy",
     "why": "the original's forced re-pull fell back to the admin image when a registry did not answer"},
    {"id": "image-policy", "what": "a CONTAINER_IMAGE in a user's settings file must start with a prefix of ccc:cluster:image_policy:allowed_prefixes",
     "why": "the original ran any image a user named, pulled with root's registry logins; the migration allows the prefixes of the admins' own images"},
    {"id": "purge-user-data", "what": "PURGE_USER_DATA is not carried over; in ccc-salt it acts only with DISABLED and deletes one stack's home",
     "why": "the original deleted all of the user's data on every run, with or without DISABLED; a migration must never delete data"},
    {"id": "node-lists", "what": "DEPLOYMENT_NODES, ALLOWED_NODES and the ADDITIONAL_* keys are lists",
     "why": "the original tested a string by substring matching (node1 matched node10)"},
    {"id": "orphans", "what": "a container whose entry leaves ccc:containers is removed (data kept)",
     "why": "the original left it running forever"},
    {"id": "settings-errors", "what": "a settings file with mistakes keeps the container on its last accepted settings and says why in .deploy",
     "why": "the original silently fell back to the defaults or to another container's settings"},
]

IDS = frozenset(item["id"] for item in DIFFERENCES)
