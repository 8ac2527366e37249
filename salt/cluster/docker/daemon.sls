{#- docker: /etc/docker/daemon.json from ccc:docker:daemon (+ the nvidia runtime where the toolkit
    is on), validated by dockerd when it can; dockerd restarted only when the file changed. #}
{%- from tpldir ~ "/map.jinja" import docker with context %}
include:
  - .install

ccc-cluster-docker-daemon-json:
  ccc_docker_daemon.config_managed:
    - name: {{ docker.daemon_file | json }}
    - nvidia: {{ salt['ccc_docker_host.toolkit_enabled'](docker) | json }}
    - require:
      - pkg: ccc-cluster-docker-engine-packages
    - watch_in:
      - service: ccc-cluster-docker-service
