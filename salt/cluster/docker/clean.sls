{#- docker absent: the Portainer agent and server, the egress firewall (chain, unit, rules file) and root's
    registry logins go. The engine, images, containers and networks stay (never user data). #}
{%- from tpldir ~ "/map.jinja" import docker with context %}
{%- set hosts = (docker.registries or []) + (salt['pillar.get']('ccc:secrets:registries', {}) | list) %}
include:
  - .firewall-absent

ccc-cluster-docker-clean-portainer-agent:
  ccc_service_container.absent:
    - name: {{ docker.portainer_agent.name | json }}
    - role: docker
    - former_roles: ["docker-portainer-agent"]

ccc-cluster-docker-clean-portainer-ui:
  ccc_service_container.absent:
    - name: {{ docker.portainer_ui.name | json }}
    - role: docker

ccc-cluster-docker-clean-registry-logins:
  ccc_docker_registry.logins_absent:
    - hosts: {{ hosts | unique | list | json }}
    - config: {{ docker.registries_config | json }}
