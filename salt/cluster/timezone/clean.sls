{#- timezone absent: back to the distribution's default zone (UTC). #}
{%- from tpldir ~ "/zone.jinja" import set_zone with context %}
{{- set_zone("ccc-cluster-timezone-clean", "Etc/UTC", true) }}
