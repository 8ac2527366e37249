#!/usr/bin/env bash
# Masterless quickstart: deploy the sample site's containers of one node on this machine's
# Docker engine (as root on Debian/Ubuntu).   CCC_NODE=node1 bash scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
node="${CCC_NODE:-node1}"
work=".local/quickstart/$node"
bash scripts/setup.sh

# The sample's storage roots stand in for the NFS shares and local disks of a real node.
for dir in /srv/ccc/shared/{user_data,group_data,apps,datasets,private_data} /srv/ccc/local/{hdd,ssd,sshd}; do
    mkdir -p "$dir"
done

# Sample images: pull them; where no registry is reachable, use a locally built demo image
# (Debian + sshd honouring USER_NAME/USER_ID/USER_PUBKEY like the CCC images) under their names.
images=$(.venv/bin/python - <<'PY'
import yaml
data = yaml.safe_load(open("sample-pillar/site/containers.sls"))
print(" ".join(sorted({c["CONTAINER_IMAGE"] for c in data["ccc"]["containers"]})))
PY
)
for image in $images; do
    docker image inspect "$image" >/dev/null 2>&1 && continue
    if ! timeout 120 docker pull -q "$image" >/dev/null 2>&1; then
        echo "== $image cannot be pulled here: using the local demo image under that name"
        bash tests/images/build.sh >/dev/null
        docker tag ccc-test/sshd:1 "$image"
    fi
done

# A demo login key for every sample user; no GPUs unless the NVIDIA container toolkit is here.
mkdir -p "$work/pillar/site/nodes"
[[ -e "$work/id_ed25519" ]] || ssh-keygen -q -t ed25519 -N "" -C ccc-quickstart -f "$work/id_ed25519"
.venv/bin/python - "$node" "$work" <<'PY'
import shutil, sys, yaml
node, work = sys.argv[1], sys.argv[2]
key = open(f"{work}/id_ed25519.pub").read().strip()
users = yaml.safe_load(open("sample-pillar/site/users.sls"))["ccc"]["users"]
ccc = yaml.safe_load(open(f"sample-pillar/site/nodes/{node}.sls"))["ccc"]
ccc["users"] = {email: {"USER_PUBKEY": key} for email in users}
if not shutil.which("nvidia-container-runtime-hook"):
    print("== no NVIDIA container toolkit on this machine: deploying without GPUs")
    ccc["node"]["compute_devices"] = {}
open(f"{work}/pillar/site/nodes/{node}.sls", "w").write(yaml.safe_dump({"ccc": ccc}))
PY
.venv/bin/python scripts/make-local-config.py --config-dir "$work/config" --id "$node" --pillar-root "$work/pillar" >/dev/null

echo "== salt-call --local state.apply containers (node $node)"
.venv/bin/salt-call --local -c "$work/config" saltutil.sync_all >/dev/null
.venv/bin/salt-call --local -c "$work/config" --state-output=terse state.apply containers

echo
echo "== containers of $node (log in with the demo key):"
docker ps --filter label=ccc.managed-by=ccc-salt --format '{{.Names}}' | sort | while read -r name; do
    user=$(docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$name" | sed -n 's/^USER_NAME=//p')
    ip=$(docker inspect -f '{{range $net, $cfg := .NetworkSettings.Networks}}{{if ne $net "claims"}}{{$cfg.IPAddress}} {{end}}{{end}}' "$name" | cut -d' ' -f1)
    echo "  $name: ssh -i $work/id_ed25519 $user@$ip"
done
echo "Settings files: /srv/ccc/shared/user_data/<email>/container-settings/<STACK_NAME>.yml (report: .deploy)"
echo "Re-run: .venv/bin/salt-call --local -c $work/config state.apply containers"
