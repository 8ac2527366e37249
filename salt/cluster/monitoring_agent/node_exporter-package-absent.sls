{#- monitoring_agent: the packaged node_exporter removed (service, package and its config, the
    role's drop-in). Included when node_exporter is off or a container, and by clean.sls. #}
ccc-cluster-monitoring_agent-node-exporter-package-service-dead:
  service.dead:
    - name: prometheus-node-exporter
    - enable: false

ccc-cluster-monitoring_agent-node-exporter-package-purged:
  pkg.purged:
    - name: prometheus-node-exporter
    - require:
      - service: ccc-cluster-monitoring_agent-node-exporter-package-service-dead

ccc-cluster-monitoring_agent-node-exporter-package-files-absent:
  file.absent:
    - names:
      - /etc/default/prometheus-node-exporter
      - /etc/systemd/system/prometheus-node-exporter.service.d/ccc-salt.conf
    - require:
      - pkg: ccc-cluster-monitoring_agent-node-exporter-package-purged
