{#- docker: root's logins to the registries of ccc:docker:registries. The credentials stay in
    pillar (ccc:secrets:registries:<host>); only host names are rendered here. #}
{%- from tpldir ~ "/map.jinja" import docker with context %}
{%- for host in docker.registries or [] %}
ccc-cluster-docker-registry-{{ host }}:
  ccc_docker_registry.logged_in:
    - name: {{ host | json }}
    - config: {{ docker.registries_config | json }}
{%- endfor %}
