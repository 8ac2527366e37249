{#- nvidia-persistenced as a unit of our own (in /etc/systemd/system, so it wins over a
    package's), with an [Install] section so it starts at boot; restarted when the unit or the
    driver packages changed. Included by init.sls. #}
{%- from tpldir ~ "/map.jinja" import nvidia with context %}
ccc-cluster-nvidia-persistenced-user:
  user.present:
    - name: {{ nvidia.persistenced_user | json }}
    - system: true
    - createhome: false
    - home: /nonexistent
    - shell: /usr/sbin/nologin

ccc-cluster-nvidia-persistenced-unit:
  file.managed:
    - name: /etc/systemd/system/nvidia-persistenced.service
    - source: salt://{{ tpldir }}/files/nvidia-persistenced.service.jinja
    - template: jinja
    - context:
        user: {{ nvidia.persistenced_user | json }}
    - user: root
    - group: root
    - mode: "0644"

ccc-cluster-nvidia-persistenced-service:
  service.running:
    - name: nvidia-persistenced
    - enable: true
    - require:
      - pkg: ccc-cluster-nvidia-packages
      - user: ccc-cluster-nvidia-persistenced-user
    - watch:
      - file: ccc-cluster-nvidia-persistenced-unit
      - pkg: ccc-cluster-nvidia-packages
