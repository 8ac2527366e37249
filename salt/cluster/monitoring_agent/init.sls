{#- monitoring_agent: node_exporter (Debian package or container) and, on GPU nodes, the GPU
    exporter as a service, both listening on the host side of ccc:monitoring:network only, and
    the forwarder container that publishes them through FRP as <node>-metrics (/ and /nvidia).
    Each part switched off is removed (node_exporter.sls, gpu_exporter.sls, forwarder.sls). #}
{%- from tpldir ~ "/map.jinja" import monitoring with context %}
{%- if salt['ccc_cluster.role_enabled']('monitoring_agent') %}
{%-   set plan = salt['ccc_monitoring.plan'](monitoring) %}
{%-   if plan.problem %}
ccc-cluster-monitoring_agent-settings:
  test.configurable_test_state:
    - name: ccc:monitoring
    - changes: false
    - result: false
    - allow_test_mode_failure: true
    - comment: {{ plan.problem | json }}
{%-   else %}
include:
  - .node_exporter
  - .gpu_exporter
  - .forwarder
{%-   endif %}
{%- else %}
ccc-cluster-monitoring_agent-off:
  test.succeed_without_changes:
    - name: role monitoring_agent is off for this node (ccc:roles, ccc:only_roles)
{%- endif %}
