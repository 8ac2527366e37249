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
    # created as plain bridges by the containers role when missing; firewalling of restricted
    # networks belongs to the docker role
    networks:
      lab-unrestricted: {subnet: 172.30.0.0/24, gateway: 172.30.0.1, bridge_name: ccc-lab}
      student-restricted: {subnet: 172.30.1.0/24, gateway: 172.30.1.1, bridge_name: ccc-student}
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
