ccc:
  node:
    docker_url: unix:///var/run/docker.sock
    compute_devices:
      device_student: [GPU-9e8d7c6b-0000-4000-8000-000000000301, GPU-9e8d7c6b-0000-4000-8000-000000000302]
  roles:
    cachefilesd: true        # FS-cache for the NFS shares (ccc:cachefilesd)
    nfs_storage: true        # the shared NFS mounts (ccc:nfs_storage)
    netplan: true            # this node's interfaces from ccc:netplan below
    nvidia: true
    patroller: true          # the GPU claims service (ccc:patroller)
    frp_client: true         # frpc containers for the watched networks (ccc:frp_client)
  nvidia:
    driver_version: "535"
  swarm:
    advertise_addr: 192.168.10.13   # this node's address in the swarm (swarm role)
  # cluster role netplan (docs/pillar.md ccc:netplan): the lab network untagged, two VLANs on top
  netplan:
    ethernets:
      eno1:
        addresses: [192.168.10.13/24]
        gateway4: 192.168.10.1
        nameservers: {addresses: [192.168.10.1], search: [lab.example.org]}
    vlans:
      vlan20:
        id: 20
        link: eno1
        addresses: [10.20.0.13/24]
        routes:
          - {to: 10.21.0.0/16, via: 10.20.0.1}
      vlan30:
        id: 30
        link: eno1
        dhcp4: true
        mtu: 1496
