{#- sshd_hostkeys absent: remove this node's backups (they hold private keys; a node that no
    longer keeps them should not keep old copies either). The shared sets in
    <state_dir>/host-keys and the node copies belong to the containers role and stay. #}
{%- from tpldir ~ "/map.jinja" import sshd_hostkeys with context %}
ccc-cluster-sshd_hostkeys-clean-backups:
  file.absent:
    - name: {{ sshd_hostkeys.backup_dir | json }}
