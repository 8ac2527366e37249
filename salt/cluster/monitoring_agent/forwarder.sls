{#- monitoring_agent: the forwarder container on ccc:monitoring:network, carrying the FRP labels
    of <node>-metrics (/ -> 9100, /nvidia -> 9445; basic auth as placeholders the frpc containers
    fill from ccc:secrets:basic_auth:metrics) and forwarding each port to the exporter on the host
    address. Removed when off (ccc:monitoring:forwarder:enabled; auto: with the frp_client role).
    Included by init.sls. #}
{%- from tpldir ~ "/map.jinja" import monitoring with context %}
{%- set plan = salt['ccc_monitoring.plan'](monitoring) %}
{%- if plan.forwarder %}
ccc-cluster-monitoring_agent-forwarder:
  ccc_service_container.running:
    - name: {{ plan.forwarder_name | json }}
    - spec: {{ plan.forwarder_spec | json }}
{%- elif plan.engine %}
ccc-cluster-monitoring_agent-forwarder-absent:
  ccc_service_container.absent:
    - name: {{ plan.forwarder_name | json }}
    - role: monitoring_agent
{%- else %}
ccc-cluster-monitoring_agent-forwarder-off:
  test.succeed_without_changes:
    - name: no metrics forwarder on this node (ccc:monitoring:forwarder; no Docker engine answers here)
{%- endif %}
