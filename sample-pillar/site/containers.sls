ccc:
  containers:
    - STACK_NAME: ana-main
      USER_EMAIL: ana.novak@example.org
      CONTAINER_IMAGE: vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1
      SHM_SIZE: 8g
      FRP_PORTS:
        TCP: [22]
        HTTP:
          - {port: 6006, subdomain: ana-tb, pass: change-me, health_check: false}
    - STACK_NAME: ana-jupyter
      USER_EMAIL: ana.novak@example.org
      CONTAINER_IMAGE: vicoslab/ccc:jupyter-latest-ubuntu22.04-cuda12.6.1
      STORAGE_NAME: ana-main
      DEPLOYMENT_NODES: [node1]
      FRP_PORTS:
        TCP: [22]
        HTTP:
          - {port: 8080, subdomain: ana-jupyter, pass: change-me-too}
    - STACK_NAME: bor-main
      USER_EMAIL: bor.kralj@example.org
      CONTAINER_IMAGE: vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1
      DEPLOYMENT_NODES: [node1, node2]
      INSTALL_PACKAGES: "htop nano"
      FRP_PORTS:
        TCP: [22]
    - STACK_NAME: cene-thesis
      USER_EMAIL: cene.zupan@example.org
      CONTAINER_IMAGE: vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1
      FRP_PORTS:
        TCP: [22]
    - STACK_NAME: dara-course
      USER_EMAIL: dara.kos@example.org
      CONTAINER_IMAGE: vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1
      FRP_PORTS:
        TCP: [22]
    - STACK_NAME: dara-old
      USER_EMAIL: dara.kos@example.org
      CONTAINER_IMAGE: vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1
      DISABLED: true
