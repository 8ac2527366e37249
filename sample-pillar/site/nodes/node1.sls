ccc:
  node:
    docker_url: unix:///var/run/docker.sock
    compute_devices:
      device_lab: [GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110001, GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110002]
      device_student: [GPU-5f1c2a64-8a1e-4b7e-9d1e-0c0a11110003]
  roles:
    nvidia: true
