{#- frp_client: one frpc container per watched Docker network (ccc:frp_client:networks), publishing
    what the frp.* labels of containers on that network ask for. Token and basic-auth credentials
    reach frpc as secret env (the state reads them by key; nothing secret is rendered here). #}
{%- from tpldir ~ "/map.jinja" import frp_client with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("frp_client", frp_client, salt["ccc_frp.client_specs"]) %}
{%- set specs = plan.specs %}
{#- haproxy (Debian's) is each frpc's Docker API proxy (allowlist frpc), run by systemd #}
ccc-cluster-frp_client-haproxy:
  pkg.installed:
    - name: haproxy

ccc-cluster-frp_client-log-dir:
  file.directory:
    - name: {{ frp_client.log_dir | json }}
    - user: root
    - group: root
    - mode: "0750"
    - makedirs: true
{%- for spec in specs %}

ccc-cluster-frp_client-container-{{ spec.name }}:
  ccc_service_container.running:
    - name: {{ spec.name | json }}
    - spec: {{ spec | json }}
    - require:
      - file: ccc-cluster-frp_client-log-dir
      - pkg: ccc-cluster-frp_client-haproxy
{%- endfor %}

ccc-cluster-frp_client-prune:
  ccc_service_container.pruned:
    - name: frpc containers no longer in ccc:frp_client:networks
    - role: frp_client
    - keep: {{ specs | map(attribute='name') | list | json }}
{%- endcall %}
