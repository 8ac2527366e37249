{#- nfs_storage: the NFS user and group (ccc:cluster:nfs_user: no home, password locked), nfs-common
    and the shared mounts of ccc:nfs_storage:mounts at their ccc:cluster:mount_points:nfs paths, in
    fstab and mounted now (ccc_nfs.mounted: a server that does not answer fails this role, it never
    leaves a silent local folder). Nothing is written while a setting is wrong. #}
{%- from tpldir ~ "/map.jinja" import nfs_storage with context %}
{%- if salt['ccc_cluster.role_enabled']('nfs_storage') %}
{%-   set checked = salt['ccc_nfs.mounts'](nfs_storage) %}
{%-   set user = salt['ccc_containers.settings']().cluster.nfs_user %}
{%-   if checked.problems %}
ccc-cluster-nfs_storage-settings:
  test.configurable_test_state:
    - changes: false
    - result: false
    - allow_test_mode_failure: true
    - name: ccc:nfs_storage
    - comment: {{ ("ccc:nfs_storage is not valid, nothing changed: " ~ checked.problems | join("; ")) | json }}
{%-   else %}
ccc-cluster-nfs_storage-group:
  group.present:
    - name: {{ user.name | json }}
    - gid: {{ user.get('gid', user.uid) | int }}

ccc-cluster-nfs_storage-user:
  user.present:
    - name: {{ user.name | json }}
    - uid: {{ user.uid | int }}
    - gid: {{ user.get('gid', user.uid) | int }}
    - createhome: false
    - home: /nonexistent
    - shell: /usr/sbin/nologin
    - password: "!"
    - fullname: CCC NFS user
    - require:
      - group: ccc-cluster-nfs_storage-group

ccc-cluster-nfs_storage-package:
  pkg.installed:
    - name: nfs-common
{%-     for mount in checked.mounts %}

ccc-cluster-nfs_storage-mount-{{ mount.key }}:
  ccc_nfs.mounted:
    - name: {{ mount.path | json }}
    - source: {{ mount.source | json }}
    - fstype: {{ mount.fstype | json }}
    - options: {{ mount.options | json }}
    - timeout: {{ nfs_storage.check_timeout | int }}
    - require:
      - pkg: ccc-cluster-nfs_storage-package
{%-     endfor %}
{%-   endif %}
{%- else %}
ccc-cluster-nfs_storage-off:
  test.succeed_without_changes:
    - name: role nfs_storage is off for this node (ccc:roles, ccc:only_roles)
{%- endif %}
