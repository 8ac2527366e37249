{#- The node's Docker networks, one owner (also included by the containers role): every network of
    ccc:cluster:networks and every network containers join, as plain bridges; a changed definition
    recreates a network only while no container uses it (ccc_docker_network.present). #}
{%- for name in salt['ccc_docker_host.networks']() %}
ccc-cluster-docker-network-{{ name }}:
  ccc_docker_network.present:
    - name: {{ name | json }}
{%- endfor %}
