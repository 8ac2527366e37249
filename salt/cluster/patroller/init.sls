{#- patroller: the claims container (Patroller: GPU claims of this node, reached by compute
    containers as "claims"/"reservation" on the claims network, published as <node>-monitor
    through FRP) and, where enabled, its web UI with its admin folder. Rules and specs:
    _utils/ccc_patroller.py (salt-call ccc_patroller.plan); containers: ccc_service_container. #}
{%- from tpldir ~ "/map.jinja" import patroller with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("patroller", patroller, salt["ccc_patroller.plan"]) %}
ccc-cluster-patroller-gpus:
  test.succeed_without_changes:
    - name: {{ plan.gpus | json }}

{#- haproxy (Debian's) is Patroller's Docker API proxy (allowlist patroller), run by systemd #}
ccc-cluster-patroller-haproxy:
  pkg.installed:
    - name: haproxy

ccc-cluster-patroller-claims-container:
  ccc_service_container.running:
    - name: {{ plan.claims.name | json }}
    - spec: {{ plan.claims | json }}
    - require:
      - pkg: ccc-cluster-patroller-haproxy
{%- if plan.webui %}
{%-   set files = plan.webui_files %}

ccc-cluster-patroller-webui-folder:
  file.directory:
    - name: {{ files.folder | json }}
    - user: root
    - group: root
    - mode: "0755"
    - makedirs: true

{#- the web UI's data: created empty when missing, never replaced or truncated #}
ccc-cluster-patroller-webui-occupancy-data:
  file.managed:
    - name: {{ files.parquet | json }}
    - replace: false
    - user: root
    - group: root
    - mode: "0644"
    - require:
      - file: ccc-cluster-patroller-webui-folder

ccc-cluster-patroller-webui-config:
  file.managed:
    - name: {{ files.config | json }}
    - contents: {{ plan.webui_config | json }}
    - user: root
    - group: root
    - mode: "0644"
    - require:
      - file: ccc-cluster-patroller-webui-folder

ccc-cluster-patroller-webui-container:
  ccc_service_container.running:
    - name: {{ plan.webui.name | json }}
    - spec: {{ plan.webui | json }}
    - require:
      - file: ccc-cluster-patroller-webui-occupancy-data
      - file: ccc-cluster-patroller-webui-config
{%- else %}

ccc-cluster-patroller-webui-container:
  ccc_service_container.absent:
    - name: {{ patroller.webui.name | json }}
    - role: patroller
{%- endif %}
{%- endcall %}
