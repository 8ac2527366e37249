{#- netplan: this node's interfaces, bonds and VLANs from ccc:netplan in the role's own netplan
    file, validated with `netplan generate` before it is written, then `netplan apply`
    (_states/ccc_netplan.py). The settings are the admin's network pillar, no secret. #}
{%- from tpldir ~ "/map.jinja" import netplan with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("netplan", netplan) %}
{#- netplan apply runs udevadm (package udev), which netplan.io does not depend on. #}
ccc-cluster-netplan-package:
  pkg.installed:
    - pkgs: [netplan.io, udev]

ccc-cluster-netplan-config:
  ccc_netplan.config_managed:
    - name: ccc:netplan
    - settings: {{ netplan | json }}
    - require:
      - pkg: ccc-cluster-netplan-package
{%- endcall %}
