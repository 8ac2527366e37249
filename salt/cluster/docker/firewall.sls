{#- docker: egress rules of restricted networks (restricted_access / allowed_access in
    ccc:cluster:networks) in chain CCC-EGRESS, jumped to first from DOCKER-USER, compared with the
    live chain on every run, and replayed after every dockerd start and at boot by
    ccc-docker-firewall.service from the rules file. No restricted network: all of it removed. #}
{%- from tpldir ~ "/map.jinja" import docker with context %}
{%- if salt['ccc_docker_host.restricted_networks']() %}
include:
  - .install

ccc-cluster-docker-firewall-script:
  file.managed:
    - name: /usr/local/sbin/ccc-docker-firewall
    - source: salt://cluster/docker/files/ccc-docker-firewall
    - mode: "0755"

ccc-cluster-docker-firewall-unit:
  file.managed:
    - name: /etc/systemd/system/ccc-docker-firewall.service
    - source: salt://cluster/docker/files/ccc-docker-firewall.service
    - mode: "0644"

ccc-cluster-docker-firewall-chain:
  ccc_docker_firewall.managed:
    - rules_file: {{ docker.firewall_rules_file | json }}
    - script: /usr/local/sbin/ccc-docker-firewall
    - require:
      - file: ccc-cluster-docker-firewall-script
      - service: ccc-cluster-docker-service

ccc-cluster-docker-firewall-service:
  service.running:
    - name: ccc-docker-firewall
    - enable: true
    - require:
      - file: ccc-cluster-docker-firewall-unit
      - ccc_docker_firewall: ccc-cluster-docker-firewall-chain
{%- else %}
include:
  - .firewall-absent
{%- endif %}
