{#- fail2ban absent: stop and disable the service, remove the role's jail and country check,
    then the package (its bans go with it). geoip-bin/geoip-database stay: other tools may use them. #}
{%- from tpldir ~ "/map.jinja" import fail2ban with context %}
ccc-cluster-fail2ban-clean-service:
  service.dead:
    - name: fail2ban
    - enable: false

ccc-cluster-fail2ban-clean-files:
  file.absent:
    - names:
      - /etc/fail2ban/jail.d/ccc-sshd.local
      - {{ salt['ccc_fail2ban.jail'](fail2ban).ignore_script | json }}
    - require:
      - service: ccc-cluster-fail2ban-clean-service

ccc-cluster-fail2ban-clean-package:
  pkg.removed:
    - name: fail2ban
    - require:
      - file: ccc-cluster-fail2ban-clean-files
