{#- docker: the Docker engine (+ NVIDIA container toolkit on GPU nodes), daemon.json, the
    node's networks and the egress firewall of restricted ones, registry logins, Portainer agent. #}
{%- if salt['ccc_cluster.role_enabled']('docker') %}
include:
  - .install
  - .daemon
  - .networks
  - .firewall
  - .registries
  - .portainer
{%- else %}
ccc-cluster-docker-off:
  test.succeed_without_changes:
    - name: role docker is off for this node (ccc:roles, ccc:only_roles)
{%- endif %}
