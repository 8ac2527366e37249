{#- monitoring_agent: node_exporter (Debian package or container) and, on GPU nodes, the GPU
    exporter as a service, both listening on the host side of ccc:monitoring:network only, and
    the forwarder container that publishes them through FRP as <node>-metrics (/ and /nvidia).
    Each part switched off is removed (node_exporter.sls, gpu_exporter.sls, forwarder.sls). #}
{%- from tpldir ~ "/map.jinja" import monitoring with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("monitoring_agent", monitoring, salt["ccc_monitoring.plan"], key="monitoring") %}
include:
  - .node_exporter
  - .gpu_exporter
  - .forwarder
{%- endcall %}
