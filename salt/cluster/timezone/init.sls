{#- timezone: the node's clock zone from pillar (ccc:timezone). #}
{%- from tpldir ~ "/map.jinja" import timezone with context %}
{%- from tpldir ~ "/zone.jinja" import set_zone with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("timezone", timezone) %}
{{- set_zone("ccc-cluster-timezone", timezone.name, timezone.utc) }}
{%- endcall %}
