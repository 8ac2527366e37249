ccc:
  node:
    docker_url: unix:///var/run/docker.sock
    compute_devices:
      device_student: [GPU-9e8d7c6b-0000-4000-8000-000000000301, GPU-9e8d7c6b-0000-4000-8000-000000000302]
  roles:
    nvidia: true
  nvidia:
    driver_version: "535"
