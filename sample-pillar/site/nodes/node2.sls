ccc:
  node:
    docker_url: unix:///var/run/docker.sock
    compute_devices:
      device_lab:
        - GPU-7a2b3c4d-0000-4000-8000-000000000201
        - GPU-7a2b3c4d-0000-4000-8000-000000000202
        - GPU-7a2b3c4d-0000-4000-8000-000000000203
        - GPU-7a2b3c4d-0000-4000-8000-000000000204
  roles:
    cachefilesd: true        # FS-cache for the NFS shares (ccc:cachefilesd)
    nfs_storage: true        # the shared NFS mounts (ccc:nfs_storage)
    netplan: true            # this node's interfaces from ccc:netplan below
    nvidia: true
    patroller: true          # the GPU claims service (ccc:patroller)
    frp_client: true         # frpc containers for the watched networks (ccc:frp_client)
    superfan_gpu: true       # its chassis fans follow the GPUs (ccc:fans)
  swarm:
    advertise_addr: 192.168.10.12   # this node's address in the swarm (swarm role)
  # cluster role superfan_gpu (docs/pillar.md ccc:fans): this chassis' system fan zones follow the
  # hottest GPU. Keys left out take their defaults from _utils/ccc_fan_config.py
  # (salt-call ccc_fans.config shows them). Keep a curve in one pillar file only: Salt merges maps,
  # so a cluster-wide curve and a node's would mix point by point.
  fans:
    # above 50 % is loud, above 60 % extremely loud
    curve: {0: 20, 60: 30, 65: 35, 70: 40, 75: 45, 77: 48, 80: 51, 83: 55, 90: 60}
  # cluster role netplan (docs/pillar.md ccc:netplan): two NICs bonded with LACP
  netplan:
    ethernets:
      eno1: {}
      eno2: {}
    bonds:
      bond0:
        interfaces: [eno1, eno2]
        parameters: {mode: 802.3ad, lacp_rate: fast, mii_monitor_interval: 100, transmit_hash_policy: layer3+4}
        addresses: [192.168.10.12/24]
        gateway4: 192.168.10.1
        nameservers: [192.168.10.1]
        mtu: 9000
