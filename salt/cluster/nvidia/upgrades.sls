{#- Keep the driver away from unattended-upgrades with a drop-in of our own (the distribution's
    50unattended-upgrades is left as it is). Included by init.sls. #}
{%- from tpldir ~ "/map.jinja" import nvidia with context %}
{%- set plan = salt['ccc_nvidia.plan'](nvidia) %}
ccc-cluster-nvidia-upgrades-blacklist:
  file.managed:
    - name: /etc/apt/apt.conf.d/51ccc-nvidia-blacklist
    - contents: {{ plan.blacklist | json }}
    - user: root
    - group: root
    - mode: "0644"
