{#- fail2ban: the host sshd jail from ccc:fail2ban (checked by _utils/ccc_fail2ban.py; nothing
    is written while a value is wrong), the optional never-ban-my-country check, and the service,
    restarted only when its config changed. #}
{%- from tpldir ~ "/map.jinja" import fail2ban with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(jail) role("fail2ban", fail2ban, salt["ccc_fail2ban.jail"]) %}
ccc-cluster-fail2ban-package:
  pkg.installed:
    - name: fail2ban
{%- if fail2ban.version %}
    - version: {{ fail2ban.version | string | json }}
{%- endif %}
{%- if fail2ban.backend == 'systemd' %}

ccc-cluster-fail2ban-journal-reader:
  pkg.installed:
    - name: python3-systemd
    - require_in:
      - service: ccc-cluster-fail2ban-service
{%- endif %}

ccc-cluster-fail2ban-ignore-country:
{%- if jail.ignore_country %}
  pkg.installed:
    - pkgs: [geoip-bin, geoip-database]
  file.managed:
    - name: {{ jail.ignore_script | json }}
    - source: salt://{{ tpldir }}/files/ignore-country
    - user: root
    - group: root
    - mode: "0755"
    - makedirs: true
    - require:
      - pkg: ccc-cluster-fail2ban-ignore-country
{%- else %}
  file.absent:
    - name: {{ jail.ignore_script | json }}
{%- endif %}
    - require_in:
      - file: ccc-cluster-fail2ban-jail

ccc-cluster-fail2ban-jail:
  file.managed:
    - name: /etc/fail2ban/jail.d/ccc-sshd.local
    - contents: {{ jail.text | json }}
    - user: root
    - group: root
    - mode: "0644"
    - require:
      - pkg: ccc-cluster-fail2ban-package

ccc-cluster-fail2ban-service:
  service.running:
    - name: fail2ban
    - enable: true
    - require:
      - pkg: ccc-cluster-fail2ban-package
    - watch:
      - file: ccc-cluster-fail2ban-jail
{%- endcall %}
