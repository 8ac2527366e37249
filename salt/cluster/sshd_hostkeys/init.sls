{#- sshd_hostkeys: root-only backups of the containers' shared SSH host key sets
    (<state_dir>/host-keys, made by the containers role), refreshed when the sets changed, and
    rotated sets copied to this node's container copies (<sshd_data>/stacks/<STACK>/keys).
    Rotation is a command, not a state: salt-call ccc_hostkeys.rotate <STACK_NAME>. #}
{%- from tpldir ~ "/map.jinja" import sshd_hostkeys with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("sshd_hostkeys", sshd_hostkeys) %}
ccc-cluster-sshd_hostkeys-backup:
  ccc_hostkeys.backed_up:
    - name: {{ sshd_hostkeys.backup_dir | json }}
    - keep: {{ sshd_hostkeys.keep | json }}

ccc-cluster-sshd_hostkeys-node-copies:
  ccc_hostkeys.node_copies_current:
    - name: {{ salt['ccc_containers.settings']().cluster.mount_points.local.sshd_data | json }}
{%- endcall %}
