{#- monitoring_agent: the GPU exporter service removed (stopped, disabled, unit and config gone).
    The shared agents install stays for cluster.agents.clean to decide. Included when the GPU
    exporter is off and by clean.sls. The service state's ID is the one cluster.agents.clean
    waits for before it removes /opt/ccc-agents (ccc-cluster-<role>-clean-service). #}
ccc-cluster-monitoring_agent-clean-service:
  service.dead:
    - name: ccc-gpu-exporter
    - enable: false

ccc-cluster-monitoring_agent-gpu-exporter-files-absent:
  file.absent:
    - names:
      - /etc/systemd/system/ccc-gpu-exporter.service
      - /etc/ccc/gpu-exporter.yaml
    - require:
      - service: ccc-cluster-monitoring_agent-clean-service

ccc-cluster-monitoring_agent-gpu-exporter-daemon-reload:
  cmd.run:
    - name: systemctl daemon-reload
    - onchanges:
      - file: ccc-cluster-monitoring_agent-gpu-exporter-files-absent
