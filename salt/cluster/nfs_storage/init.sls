{#- nfs_storage: the NFS user and group (ccc:cluster:nfs_user: no home, password locked), nfs-common
    and the shared mounts of ccc:nfs_storage:mounts at their ccc:cluster:mount_points:nfs paths, in
    fstab and mounted now (ccc_nfs.mounted: a server that does not answer fails this role, it never
    leaves a silent local folder). Nothing is written while a setting is wrong. #}
{%- from tpldir ~ "/map.jinja" import nfs_storage with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(checked) role("nfs_storage", nfs_storage, salt["ccc_nfs.mounts"]) %}
{%- set user = salt['ccc_containers.settings']().cluster.nfs_user %}
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
{%- for mount in checked.mounts %}

ccc-cluster-nfs_storage-mount-{{ mount.key }}:
  ccc_nfs.mounted:
    - name: {{ mount.path | json }}
    - source: {{ mount.source | json }}
    - fstype: {{ mount.fstype | json }}
    - options: {{ mount.options | json }}
    - timeout: {{ nfs_storage.check_timeout | int }}
    - require:
      - pkg: ccc-cluster-nfs_storage-package
{%- endfor %}
{%- endcall %}
