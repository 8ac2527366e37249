{#- nvidia absent: stop and disable persistenced, remove the role's unit, blacklist drop-in and
    repository, and release the hold on the driver packages. The driver itself stays installed:
    removing it from a running GPU node is a separate, deliberate step (apt purge 'nvidia-*'). #}
{%- from tpldir ~ "/map.jinja" import nvidia with context %}
ccc-cluster-nvidia-clean-persistenced:
  service.dead:
    - name: nvidia-persistenced
    - enable: false

ccc-cluster-nvidia-clean-files:
  file.absent:
    - names:
      - /etc/systemd/system/nvidia-persistenced.service
      - /etc/apt/apt.conf.d/51ccc-nvidia-blacklist
      - /etc/apt/sources.list.d/ccc-nvidia-driver.list
      - /etc/apt/keyrings/ccc-nvidia-driver.asc
    - require:
      - service: ccc-cluster-nvidia-clean-persistenced

ccc-cluster-nvidia-clean-daemon-reload:
  module.run:
    - service.systemctl_reload: []
    - onchanges:
      - file: ccc-cluster-nvidia-clean-files
{%- set names = salt['ccc_nvidia.plan'](nvidia).packages %}
{%- if names %}

ccc-cluster-nvidia-clean-unhold:
  pkg.unheld:
    - pkgs: {{ names | json }}
{%- endif %}
