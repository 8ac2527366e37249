ccc:
  cluster:
    mount_points:
      nfs:
        user_data: /srv/ccc/shared/user_data
        group_data: /srv/ccc/shared/group_data
        apps_data: /srv/ccc/shared/apps
        dataset_data: /srv/ccc/shared/datasets
        private_data: /srv/ccc/shared/private_data
      local:
        hdd_data: /srv/ccc/local/hdd
        ssd_data: /srv/ccc/local/ssd
        sshd_data: /srv/ccc/local/sshd
    nfs_user:
      name: nfs-user
      uid: 1000
      gid: 1000
    # access class of a user type -> Docker networks its containers join (plus claims_network)
    access_networks:
      restricted: [student-restricted]
      unrestricted: [lab-unrestricted]
    claims_network: claims
    # the node's Docker networks (plain bridges), created and checked by the docker role; the egress firewall of restricted
    # ones (restricted_access, allowed_access) too
    networks:
      lab-unrestricted: {subnet: 172.30.0.0/24, gateway: 172.30.0.1, bridge_name: ccc-lab}
      # restricted_access / allowed_access: egress firewall of the docker role (docs/pillar.md ccc:docker)
      student-restricted: {subnet: 172.30.1.0/24, gateway: 172.30.1.1, bridge_name: ccc-student,
                           restricted_access: [192.168.0.0/16, 10.0.0.0/8], allowed_access: [192.168.10.5]}
      claims: {subnet: 172.30.2.0/24, gateway: 172.30.2.1, bridge_name: ccc-claims}
    apps:
      - /opt/apps/matlab/bin/matlab
      - /opt/apps/pycharm/bin/pycharm.sh,pycharm
    image_policy:
      allowed_prefixes: ["vicoslab/ccc:", "registry.example.org/ccc/"]
      credentialed_prefixes: ["registry.example.org/ccc/"]
      pull: true
    shm_size_default: 2g
    shm_size_max: 32g
    reserved_subdomains: [portainer, patroller, "{node}-metrics", "{node}-monitor"]
    remove_orphans: true
  # Cluster roles (state.apply cluster, docs/roles.md): on/off per cluster here, per node in
  # nodes/<node>.sls; "absent" undoes a role.
  roles:
    nvidia: false            # GPU nodes switch the driver role on in their own file
    # the lab's nodes switch their own roles on in nodes/<node>.sls (NFS shares, FS-cache, FRP, ...)
  timezone:
    name: Europe/Ljubljana
  # cluster role fail2ban (docs/pillar.md ccc:fail2ban): the nodes' own sshd
  fail2ban:
    ignoreip: [127.0.0.1/8, "::1", 192.168.10.0/24]
    maxretry: 5
    bantime: 3600
    findtime: 600
    ignore_country: SI
  # cluster role inotify (ccc:inotify): room for IDEs and file watchers
  inotify:
    max_user_watches: 1048576
    max_user_instances: 1024
  # cluster role nvidia (ccc:nvidia): switched on per GPU node in nodes/<node>.sls
  nvidia:
    driver_version: "550"
  # cluster role sshd_hostkeys (ccc:sshd_hostkeys): local copies of the containers' host keys
  sshd_hostkeys:
    backup_dir: /var/backups/ccc-salt/host-keys
    keep: 10
  # cluster role docker (docs/pillar.md ccc:docker): Debian's docker.io, the NVIDIA runtime on GPU
  # nodes (auto), the lab registry login (credentials in secrets.sls), Portainer agent off
  docker:
    engine:
      packages: [docker.io]
    daemon:
      log-driver: json-file
      log-opts: {max-size: 50m, max-file: "3"}
    registries: [registry.example.org]
    portainer_agent:
      enabled: false
      image: portainer/agent:2.21.4
      publish_ip: 127.0.0.1
      publish_port: 9001
  # cluster role patroller (docs/pillar.md ccc:patroller): the GPU claims service compute containers
  # reach as http://claims; switched on per GPU node in nodes/<node>.sls. Published as
  # <node>-monitor through the FRP client of lab-unrestricted (basic auth: ccc:secrets:basic_auth:monitor)
  patroller:
    image: registry.example.org/vicos/patroller:latest
    lease: 30
    proxy_network: lab-unrestricted
    # the web UI: on ONE node only (its subdomain is cluster-wide); needs its own image and
    # ccc:secrets:basic_auth:patroller_webui when switched on
    webui:
      enabled: false
      storage_path: /var/lib/ccc-patroller-webui
      subdomain: patroller
      config: {}
  # cluster role monitoring_agent (docs/pillar.md ccc:monitoring): node_exporter from Debian's
  # package and, on GPU nodes, the GPU exporter, both listening on the gateway of
  # student-restricted (the host side), published as <node>-metrics (/ and /nvidia) by a forwarder
  # container once the frp_client role runs (basic auth: ccc:secrets:basic_auth:metrics)
  monitoring:
    network: student-restricted
    node_exporter:
      mode: package
    forwarder:
      image: busybox:1.36.1
  # cluster role frp_client (docs/pillar.md ccc:frp_client): one frpc container per watched network,
  # publishing what the frp.* labels of containers there ask for; token ccc:secrets:frp:token, the
  # role services' basic auth (ccc:secrets:basic_auth:*) handed to frpc as secret env
  frp_client:
    image: lukacu/frpc:latest   # pin a tested tag or digest (frp >= 0.27, /bin/sh in the image)
    server_address: frp.example.org
    server_port: 7000
    log_level: info
    networks:
      - {network: lab-unrestricted, container_name: frp-lab-client-service, log_name: lab.log}
      - {network: student-restricted, container_name: frp-student-client-service, log_name: student.log}
  # cluster role swarm (docs/pillar.md ccc:swarm, docs/roles.md): off (ccc:roles:swarm: true switches it
  # on); node1 initialises the swarm and creates each STACK's overlay-<STACK>; every node's
  # advertise_addr is in its own file; join tokens: ccc:secrets:swarm:{worker,manager}_token
  swarm:
    leader: node1
    leader_addr: 192.168.10.11
  # cluster role nfs_storage (docs/pillar.md ccc:nfs_storage): the shares of ccc:cluster:mount_points:nfs
  # from the lab's file server, in fstab and mounted (fsc added: cachefilesd is on); the NFS user is
  # ccc:cluster:nfs_user. A real site also sets ccc:cluster:mount_points:nfs_required: true so the
  # containers role refuses user data while a share is missing (this sample runs on plain folders).
  nfs_storage:
    options: [auto, async]
    mounts:
      user_data: nas.example.org:/export/ccc/user_data
      group_data: nas.example.org:/export/ccc/group_data
      apps_data: {source: "nas.example.org:/export/ccc/apps", options: [auto, ro, async]}
      dataset_data: nas.example.org:/export/ccc/datasets
      private_data: nas.example.org:/export/ccc/private_data
  # cluster role cachefilesd (docs/pillar.md ccc:cachefilesd): the FS-cache daemon, its cache on a
  # local dataset, culling thresholds in % of free space (run > cull > stop)
  cachefilesd:
    cache_dir: /data/nfs-cache
    brun: 10
    bcull: 7
    bstop: 3
    frun: 10
    fcull: 7
    fstop: 3
  # cluster role zfs (docs/pillar.md ccc:zfs): switched on per node (nodes/node1.sls has the pool);
  # the ARC limits of every ZFS node, in bytes
  zfs:
    module_parameters:
      zfs_arc_max: 17179869184
      zfs_arc_min: 4294967296
