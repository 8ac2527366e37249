{#- mellanox: the OFED driver from its apt repository (key + signed-by source), the distribution's
    conflicting RDMA packages removed first while OFED is not installed (only those pillar lists),
    the OFED packages, and openibd restarted only when they changed. Never a reboot. #}
{%- from tpldir ~ "/map.jinja" import mellanox with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("mellanox", mellanox, salt["ccc_mellanox.plan"]) %}
{%- for name, repo in plan.repositories.items() %}
ccc-cluster-mellanox-repo-key-{{ name }}:
  file.managed:
    - name: {{ repo.keyring | json }}
    - mode: "0644"
    - makedirs: true
{%-   if repo.key.startswith('salt://') %}
    - source: {{ repo.key | json }}
{%-   else %}
    - contents_pillar: ccc:mellanox:repositories:{{ name }}:key
{%-   endif %}

ccc-cluster-mellanox-repo-{{ name }}:
  pkgrepo.managed:
    - name: {{ repo.source | json }}
    - file: {{ repo.file | json }}
    - aptkey: false
    - refresh: true
    - require:
      - file: ccc-cluster-mellanox-repo-key-{{ name }}
    - require_in:
      - pkg: ccc-cluster-mellanox-packages

{%      endfor %}
{%- if plan.remove %}
ccc-cluster-mellanox-conflicting-packages:
  pkg.removed:
    - pkgs: {{ plan.remove | json }}
    - require_in:
      - pkg: ccc-cluster-mellanox-packages

{%      endif %}
ccc-cluster-mellanox-packages:
  pkg.installed:
    - pkgs: {{ plan.packages | json }}
{%- if plan.service %}

ccc-cluster-mellanox-service-restart:
  module.run:
    - service.restart:
      - name: {{ plan.service | json }}
    - onchanges:
      - pkg: ccc-cluster-mellanox-packages
{%- endif %}
{%- endcall %}
