{#- superfan_gpu absent: the controller stopped (on SIGTERM it gives the fans back to the BMC in
    the mode it found) and disabled; its unit, configuration and modules-load file removed. The
    packages (ipmitool) stay, and so do the loaded kernel modules until the next boot. The shared
    agents folder goes only when no agent role is left on the node (cluster.agents.clean). #}
include:
  - cluster.agents.clean

ccc-cluster-superfan_gpu-clean-service:
  service.dead:
    - name: ccc-fan-controller
    - enable: false

ccc-cluster-superfan_gpu-clean-files:
  file.absent:
    - names:
      - /etc/systemd/system/ccc-fan-controller.service
      - /etc/ccc/fan-controller.yaml
      - /etc/modules-load.d/ccc-ipmi.conf
    - require:
      - service: ccc-cluster-superfan_gpu-clean-service

ccc-cluster-superfan_gpu-clean-daemon-reload:
  module.run:
    - service.systemctl_reload: []
    - onchanges:
      - file: ccc-cluster-superfan_gpu-clean-files
