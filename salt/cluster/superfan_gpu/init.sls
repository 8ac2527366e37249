{#- superfan_gpu: the GPU fan controller (agents/ccc_fan_controller.py) as the systemd service
    ccc-fan-controller: the agents from salt/cluster/agents, ipmitool, the IPMI kernel modules
    loaded now and at boot, /etc/ccc/fan-controller.yaml from pillar ccc:fans; restarted when
    the code, its python, the configuration or the unit changes. #}
{%- from tpldir ~ "/map.jinja" import superfan_gpu with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("superfan_gpu", superfan_gpu, key="fans") %}
include:
  - cluster.agents

ccc-cluster-superfan_gpu-packages:
  pkg.installed:
    - pkgs: {{ superfan_gpu.packages | json }}
    - install_recommends: false

ccc-cluster-superfan_gpu-modules-load:
  file.managed:
    - name: /etc/modules-load.d/ccc-ipmi.conf
    - contents: {{ ("# Managed by Salt (ccc-salt role superfan_gpu): the fan controller reaches the BMC through /dev/ipmi0.\n" ~ superfan_gpu.kernel_modules | join("\n")) | json }}
    - user: root
    - group: root
    - mode: "0644"
{%- for module in superfan_gpu.kernel_modules %}

{#- Loaded now (at boot: systemd-modules-load reads the file above). A node that cannot load it
    (no such module for its kernel, or a container without the host's /lib/modules) fails this
    state with the reason; the service is still set up (it exits 3 until /dev/ipmi0 exists). #}
ccc-cluster-superfan_gpu-module-{{ module }}:
  cmd.run:
    - name: {{ ("modprobe " ~ module ~ " || { echo 'cannot load the kernel module " ~ module ~ ": without it the fan controller has no /dev/ipmi0 and cannot reach the BMC' >&2; exit 1; }") | json }}
    - unless: test -d /sys/module/{{ module }}
{%- endfor %}

ccc-cluster-superfan_gpu-config:
  file.managed:
    - name: /etc/ccc/fan-controller.yaml
    - source: salt://agents/config/fan-controller.yaml.jinja
    - template: jinja
    - user: root
    - group: root
    - mode: "0644"
    - makedirs: true

ccc-cluster-superfan_gpu-unit:
  file.managed:
    - name: /etc/systemd/system/ccc-fan-controller.service
    - source: salt://agents/systemd/ccc-fan-controller.service
    - user: root
    - group: root
    - mode: "0644"

ccc-cluster-superfan_gpu-service:
  service.running:
    - name: ccc-fan-controller
    - enable: true
    - require:
      - pkg: ccc-cluster-superfan_gpu-packages
      - sls: cluster.agents
    - watch:
      - sls: cluster.agents
      - file: ccc-cluster-superfan_gpu-config
      - file: ccc-cluster-superfan_gpu-unit
{%- endcall %}
