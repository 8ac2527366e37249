{#- timezone: the node's clock zone from pillar (ccc:timezone). #}
{%- from tpldir ~ "/map.jinja" import timezone with context %}
{%- from tpldir ~ "/zone.jinja" import set_zone with context %}
{%- if salt['ccc_cluster.role_enabled']('timezone') %}
{{- set_zone("ccc-cluster-timezone", timezone.name, timezone.utc) }}
{%- else %}
ccc-cluster-timezone-off:
  test.succeed_without_changes:
    - name: role timezone is off for this node (ccc:roles, ccc:only_roles)
{%- endif %}
