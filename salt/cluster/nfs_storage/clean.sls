{#- nfs_storage absent: the role's fstab entries go, so the next boot mounts nothing of it. The live
    mounts, the NFS user and nfs-common stay: unmounting under running containers would put their
    writes on the local disk, and the user owns every user file on the shares. #}
{%- from tpldir ~ "/map.jinja" import nfs_storage with context %}
{%- set checked = salt['ccc_nfs.mounts'](nfs_storage) %}
{%- for mount in checked.mounts %}
ccc-cluster-nfs_storage-clean-fstab-{{ mount.key }}:
  mount.fstab_absent:
    - name: {{ mount.source | json }}
    - fs_file: {{ mount.path | json }}
{%- else %}
ccc-cluster-nfs_storage-clean-none:
  test.succeed_without_changes:
    - name: nfs_storage configures no mounts here; nothing to clean (live mounts and the NFS user are kept)
{%- endfor %}
