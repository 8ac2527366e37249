{#- nvidia: the driver packages pinned and held, nvidia-persistenced enabled, the packages kept
    away from unattended-upgrades, and "reboot needed" reported (never a reboot). #}
{%- from tpldir ~ "/map.jinja" import nvidia with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("nvidia", nvidia, salt["ccc_nvidia.plan"]) %}
include:
  - .install
  - .upgrades
  - .persistenced
{%- endcall %}
