{#- monitoring_agent absent: every part the role set up goes: the packaged node_exporter (service,
    package, its config, the drop-in), the node_exporter and forwarder containers, the GPU
    exporter's service, unit and config, and the shared agents install when no other role uses it
    (cluster.agents.clean). #}
{%- from tpldir ~ "/map.jinja" import monitoring with context %}
{%- set plan = salt['ccc_monitoring.plan'](monitoring) %}
include:
  - .node_exporter-package-absent
  - .gpu_exporter-absent
  - cluster.agents.clean
{%- if plan.engine %}

ccc-cluster-monitoring_agent-clean-node-exporter-container:
  ccc_service_container.absent:
    - name: {{ plan.node_exporter_name | json }}
    - role: monitoring_agent

ccc-cluster-monitoring_agent-clean-forwarder:
  ccc_service_container.absent:
    - name: {{ plan.forwarder_name | json }}
    - role: monitoring_agent
{%- endif %}
