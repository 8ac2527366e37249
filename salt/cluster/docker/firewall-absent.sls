{#- docker: no egress firewall (no restricted network, or the role cleaned): the jump, the chain,
    the rules file, the unit and its script removed. #}
{%- from tpldir ~ "/map.jinja" import docker with context %}
ccc-cluster-docker-firewall-chain-absent:
  ccc_docker_firewall.absent:
    - rules_file: {{ docker.firewall_rules_file | json }}

ccc-cluster-docker-firewall-service-disabled:
  service.disabled:
    - name: ccc-docker-firewall
    - onlyif: test -e /etc/systemd/system/ccc-docker-firewall.service

ccc-cluster-docker-firewall-unit-absent:
  file.absent:
    - name: /etc/systemd/system/ccc-docker-firewall.service
    - require:
      - service: ccc-cluster-docker-firewall-service-disabled

ccc-cluster-docker-firewall-script-absent:
  file.absent:
    - name: /usr/local/sbin/ccc-docker-firewall
