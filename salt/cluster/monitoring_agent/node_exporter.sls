{#- monitoring_agent: Prometheus' node_exporter as ccc:monitoring:node_exporter says: Debian's
    package (its args in /etc/default/prometheus-node-exporter, written before the package so its
    first start already listens on the host address only), a container, or neither; the other
    form is removed. Included by init.sls. #}
{%- from tpldir ~ "/map.jinja" import monitoring with context %}
{%- set plan = salt['ccc_monitoring.plan'](monitoring) %}
{%- set node = monitoring.node_exporter %}
{%- if plan.node_exporter != 'package' %}
include:
  - .node_exporter-package-absent
{%- endif %}
{%- if plan.node_exporter == 'package' %}

ccc-cluster-monitoring_agent-node-exporter-defaults:
  file.managed:
    - name: /etc/default/prometheus-node-exporter
    - contents: {{ plan.package_defaults | json }}
    - user: root
    - group: root
    - mode: "0644"

{#- The listen address is a Docker bridge's gateway: it exists once dockerd has started, so the
    exporter starts after dockerd and retries (a boot where the bridge comes late). #}
ccc-cluster-monitoring_agent-node-exporter-dropin:
  file.managed:
    - name: /etc/systemd/system/prometheus-node-exporter.service.d/ccc-salt.conf
    - makedirs: true
    - user: root
    - group: root
    - mode: "0644"
    - contents: |
        # Managed by Salt (ccc-salt cluster role monitoring_agent): the listen address is the
        # gateway of a Docker network, which exists once dockerd runs.
        [Unit]
        After=docker.service
        StartLimitIntervalSec=0
        [Service]
        Restart=on-failure
        RestartSec=5s

ccc-cluster-monitoring_agent-node-exporter-package:
  pkg.installed:
    - pkgs:
{%-   for package in node.packages %}
{%-     if node.version %}
      - {{ package }}: {{ node.version | string | json }}
{%-     else %}
      - {{ package }}
{%-     endif %}
{%-   endfor %}
    - install_recommends: false
    - require:
      - file: ccc-cluster-monitoring_agent-node-exporter-defaults
      - file: ccc-cluster-monitoring_agent-node-exporter-dropin

ccc-cluster-monitoring_agent-node-exporter-service:
  service.running:
    - name: prometheus-node-exporter
    - enable: true
    - require:
      - pkg: ccc-cluster-monitoring_agent-node-exporter-package
    - watch:
      - file: ccc-cluster-monitoring_agent-node-exporter-defaults
      - file: ccc-cluster-monitoring_agent-node-exporter-dropin
      - pkg: ccc-cluster-monitoring_agent-node-exporter-package
{%- elif plan.node_exporter == 'container' %}

ccc-cluster-monitoring_agent-node-exporter-container:
  ccc_service_container.running:
    - name: {{ node.container_name | json }}
    - spec: {{ plan.node_exporter_spec | json }}
    - require:
      - sls: {{ tpldir | replace('/', '.') }}.node_exporter-package-absent
{%- endif %}
{%- if plan.node_exporter != 'container' and plan.engine %}

ccc-cluster-monitoring_agent-node-exporter-container-absent:
  ccc_service_container.absent:
    - name: {{ node.container_name | json }}
    - role: monitoring_agent
{%- endif %}
