{#- zfs absent: the role's modprobe file goes (only when it is ours). Pools, datasets, disks and
    the ZFS tools stay: the data on them is users' and ZFS keeps serving it. The live module
    parameters keep their values until the module is reloaded. #}
{%- from tpldir ~ "/map.jinja" import zfs with context %}
ccc-cluster-zfs-clean-modprobe:
  ccc_zfs.modprobe_absent:
    - name: {{ zfs.modprobe_file | json }}
