ccc:
  node:
    docker_url: unix:///var/run/docker.sock
    compute_devices:
      device_lab: [GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110001, GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110002]
      device_student: [GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110003]
  roles:
    nvidia: true
    patroller: true          # the GPU claims service (ccc:patroller)
    frp_client: true         # frpc containers for the watched networks (ccc:frp_client)
  swarm:
    advertise_addr: 192.168.10.11   # this node's address in the swarm (swarm role)
