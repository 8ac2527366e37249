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
    nvidia: true
