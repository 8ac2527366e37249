{#- nvidia driver packages: the optional apt repository with its key, other driver branches
    purged (they conflict and may be held), the wanted packages installed and held, and the
    reboot flag when they changed or the loaded module differs. Included by init.sls. #}
{%- from tpldir ~ "/map.jinja" import nvidia with context %}
{%- set plan = salt['ccc_nvidia.plan'](nvidia) %}
{%- if plan.repo %}
ccc-cluster-nvidia-repo-key:
  file.managed:
    - name: {{ plan.repo.keyring | json }}
    - contents: {{ plan.repo.key | json }}
    - mode: "0644"
    - makedirs: true

ccc-cluster-nvidia-repo:
  pkgrepo.managed:
    - name: {{ plan.repo.line | json }}
    - file: /etc/apt/sources.list.d/ccc-nvidia-driver.list
    - aptkey: false
    - refresh: true
    - require:
      - file: ccc-cluster-nvidia-repo-key
    - require_in:
      - pkg: ccc-cluster-nvidia-packages
{%- endif %}
{%- if plan.stale %}

ccc-cluster-nvidia-stale-unhold:
  pkg.unheld:
    - pkgs: {{ plan.stale | json }}

ccc-cluster-nvidia-stale:
  pkg.purged:
    - pkgs: {{ plan.stale | json }}
    - require:
      - pkg: ccc-cluster-nvidia-stale-unhold
    - require_in:
      - pkg: ccc-cluster-nvidia-packages
{%- endif %}

ccc-cluster-nvidia-packages:
  pkg.installed:
    - pkgs: {{ plan.packages | json }}
    - hold: {{ nvidia.hold | json }}
    - install_recommends: false

ccc-cluster-nvidia-reboot-needed:
  ccc_nvidia.reboot_flagged:
    - name: /var/run/reboot-required
    - packages: {{ plan.packages | json }}
    - watch:
      - pkg: ccc-cluster-nvidia-packages
