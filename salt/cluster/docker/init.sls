{#- docker: the Docker engine (+ NVIDIA container toolkit on GPU nodes), daemon.json, the
    node's networks and the egress firewall of restricted ones, registry logins, Portainer agent. #}
{%- from tpldir ~ "/map.jinja" import docker with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("docker", docker) %}
include:
  - .install
  - .daemon
  - .networks
  - .firewall
  - .registries
  - .portainer
{%- endcall %}
