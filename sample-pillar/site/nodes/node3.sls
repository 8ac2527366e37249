ccc:
  node:
    docker_url: unix:///var/run/docker.sock
    compute_devices:
      device_student: [GPU-9e8d7c6b-0000-4000-8000-000000000301, GPU-9e8d7c6b-0000-4000-8000-000000000302]
  roles:
    nvidia: true
    patroller: true          # the GPU claims service (ccc:patroller)
    frp_client: true         # frpc containers for the watched networks (ccc:frp_client)
  nvidia:
    driver_version: "535"
  swarm:
    advertise_addr: 192.168.10.13   # this node's address in the swarm (swarm role)
