{#- zfs: zfsutils-linux, the module parameters (ARC limits), pools and datasets from ccc:zfs.
    Creates what is missing and sets properties; a pool whose layout differs from pillar fails
    its state and stays as it is (so do its datasets); nothing is ever destroyed. #}
{%- from tpldir ~ "/map.jinja" import zfs with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("zfs", zfs, salt["ccc_zfs.plan"]) %}
ccc-cluster-zfs-packages:
  pkg.installed:
    - pkgs: {{ zfs.packages | json }}

ccc-cluster-zfs-module-parameters:
  ccc_zfs.module_parameters:
    - name: {{ zfs.modprobe_file | json }}
    - parameters: {{ plan.parameters | json }}
    - live_dir: {{ zfs.parameters_dir | json }}
{%- for message in plan.refused %}

ccc-cluster-zfs-refused-{{ loop.index }}:
  test.configurable_test_state:
    - changes: false
    - result: false
    - allow_test_mode_failure: true
    - name: ccc:zfs state absent
    - comment: {{ message | json }}
{%- endfor %}
{%- for name, pool in plan.pools.items() %}

ccc-cluster-zfs-pool-{{ name }}:
  ccc_zfs.pool_present:
    - name: {{ name | json }}
    - vdevs: {{ pool.vdevs | json }}
    - properties: {{ pool.properties | json }}
    - pool_properties: {{ pool.pool_properties | json }}
    - require:
      - pkg: ccc-cluster-zfs-packages
{%- endfor %}
{%- for name, dataset in plan.datasets.items() %}

ccc-cluster-zfs-dataset-{{ name }}:
  ccc_zfs.dataset_present:
    - name: {{ name | json }}
    - properties: {{ dataset.properties | json }}
    - require:
      - ccc_zfs: ccc-cluster-zfs-pool-{{ dataset.pool }}
{%-   if name.count('/') > 1 and name.rsplit('/', 1)[0] in plan.datasets %}
      - ccc_zfs: ccc-cluster-zfs-dataset-{{ name.rsplit('/', 1)[0] }}
{%-   endif %}
{%- endfor %}
{%- endcall %}
