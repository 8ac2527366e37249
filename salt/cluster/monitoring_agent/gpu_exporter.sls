{#- monitoring_agent: the GPU exporter (agents/ccc_gpu_exporter.py from the shared agents install,
    cluster.agents) as service ccc-gpu-exporter on GPU nodes (ccc:monitoring:gpu), its config
    /etc/ccc/gpu-exporter.yaml from pillar ccc:monitoring:gpu_exporter (listening on the role's
    host address unless that says otherwise); restarted when its code, library, venv, config or
    unit change. Off: gpu_exporter-absent.sls. Included by init.sls. #}
{%- from tpldir ~ "/map.jinja" import monitoring with context %}
{%- set plan = salt['ccc_monitoring.plan'](monitoring) %}
{%- if plan.gpu %}
include:
  - cluster.agents

ccc-cluster-monitoring_agent-gpu-exporter-config:
  file.managed:
    - name: /etc/ccc/gpu-exporter.yaml
    - source: salt://agents/config/gpu-exporter.yaml.jinja
    - template: jinja
    - makedirs: true
    - user: root
    - group: root
    - mode: "0644"

ccc-cluster-monitoring_agent-gpu-exporter-unit:
  file.managed:
    - name: /etc/systemd/system/ccc-gpu-exporter.service
    - source: salt://agents/systemd/ccc-gpu-exporter.service
    - user: root
    - group: root
    - mode: "0644"

ccc-cluster-monitoring_agent-gpu-exporter-service:
  service.running:
    - name: ccc-gpu-exporter
    - enable: true
    - require:
      - sls: cluster.agents
    - watch:
      - sls: cluster.agents
      - file: ccc-cluster-monitoring_agent-gpu-exporter-config
      - file: ccc-cluster-monitoring_agent-gpu-exporter-unit
{%- else %}
include:
  - .gpu_exporter-absent
{%- endif %}
