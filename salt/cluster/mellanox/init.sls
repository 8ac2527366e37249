{#- mellanox: the OFED driver from its apt repository (key + signed-by source), the distribution's
    conflicting RDMA packages removed first while OFED is not installed (only those pillar lists),
    the OFED packages, and openibd restarted only when they changed. Never a reboot. #}
{%- from tpldir ~ "/map.jinja" import mellanox with context %}
{%- if salt['ccc_cluster.role_enabled']('mellanox') %}
{%-   set plan = salt['ccc_mellanox.plan'](mellanox) %}
{%-   if plan.problems %}
ccc-cluster-mellanox-settings:
  test.configurable_test_state:
    - changes: false
    - result: false
    - allow_test_mode_failure: true
    - name: ccc:mellanox
    - comment: {{ ("ccc:mellanox is not valid, nothing changed: " ~ plan.problems | join("; ")) | json }}
{%-   else %}
{%-     for name, repo in plan.repositories.items() %}
ccc-cluster-mellanox-repo-key-{{ name }}:
  file.managed:
    - name: {{ repo.keyring | json }}
    - mode: "0644"
    - makedirs: true
{%-       if repo.key.startswith('salt://') %}
    - source: {{ repo.key | json }}
{%-       else %}
    - contents_pillar: ccc:mellanox:repositories:{{ name }}:key
{%-       endif %}

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
{%-     if plan.remove %}
ccc-cluster-mellanox-conflicting-packages:
  pkg.removed:
    - pkgs: {{ plan.remove | json }}
    - require_in:
      - pkg: ccc-cluster-mellanox-packages

{%      endif %}
ccc-cluster-mellanox-packages:
  pkg.installed:
    - pkgs: {{ plan.packages | json }}
{%-     if plan.service %}

ccc-cluster-mellanox-service-restart:
  module.run:
    - service.restart:
      - name: {{ plan.service | json }}
    - onchanges:
      - pkg: ccc-cluster-mellanox-packages
{%-     endif %}
{%-   endif %}
{%- else %}
ccc-cluster-mellanox-off:
  test.succeed_without_changes:
    - name: role mellanox is off for this node (ccc:roles, ccc:only_roles names it to run it)
{%- endif %}
