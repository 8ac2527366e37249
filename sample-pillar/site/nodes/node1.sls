ccc:
  node:
    docker_url: unix:///var/run/docker.sock
    compute_devices:
      device_lab: [GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110001, GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110002]
      device_student: [GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110003]
  roles:
    cachefilesd: true        # FS-cache for the NFS shares (ccc:cachefilesd)
    nfs_storage: true        # the shared NFS mounts (ccc:nfs_storage)
    netplan: true            # this node's interfaces from ccc:netplan below
    nvidia: true
    zfs: true                # the local scratch pool and its datasets (ccc:zfs below)
    patroller: true          # the GPU claims service (ccc:patroller)
    frp_client: true         # frpc containers for the watched networks (ccc:frp_client)
  swarm:
    advertise_addr: 192.168.10.11   # this node's address in the swarm (swarm role)
  # cluster role netplan (docs/pillar.md ccc:netplan): this node's NICs in /etc/netplan/90-ccc-salt.yaml
  netplan:
    ethernets:
      eno1:
        addresses: [192.168.10.11/24, "fd00:10::11/64"]
        gateway4: 192.168.10.1            # written as routes: [{to: default, via: ...}]
        gateway6: "fd00:10::1"
        nameservers: {addresses: [192.168.10.1], search: [lab.example.org]}
        routes:
          - {to: 10.20.0.0/16, via: 192.168.10.254, metric: 100}
      eno2:
        mac: "3c:ec:ef:10:11:02"          # matched by MAC and named eno2 (set-name)
        addresses: [10.99.0.11/24]        # storage network
        mtu: 9000
  # cluster role zfs (docs/pillar.md ccc:zfs): the local scratch pool, a mirror of two disks, and the
  # datasets behind ccc:cluster:mount_points:local (hdd_data, ssd_data) and the FS-cache directory.
  # Never destroyed or recreated: a pool whose disks or type differ from this is reported, not touched.
  zfs:
    pools:
      scratch:
        type: mirror
        disks: [/dev/disk/by-id/ata-SAMPLE_DISK_A, /dev/disk/by-id/ata-SAMPLE_DISK_B]
        pool_properties: {ashift: 12, autotrim: "on"}
        properties: {atime: "off", compression: lz4, xattr: sa, mountpoint: none}
    datasets:
      scratch/hdd:
        mount_point: hdd_data
        properties: {recordsize: 1M, logbias: throughput}
      scratch/ssd:
        mount_point: ssd_data
        properties: {recordsize: 128K, quota: 2T}
      scratch/nfs-cache:
        properties: {mountpoint: /data/nfs-cache, recordsize: 4K, quota: 500G}
