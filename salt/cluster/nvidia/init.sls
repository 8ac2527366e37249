{#- nvidia: the driver packages pinned and held, nvidia-persistenced enabled, the packages kept
    away from unattended-upgrades, and "reboot needed" reported (never a reboot). #}
{%- from tpldir ~ "/map.jinja" import nvidia with context %}
{%- if salt['ccc_cluster.role_enabled']('nvidia') %}
{%-   set plan = salt['ccc_nvidia.plan'](nvidia) %}
{%-   if plan.problems %}
ccc-cluster-nvidia-settings:
  test.configurable_test_state:
    - changes: false
    - result: false
    - allow_test_mode_failure: true
    - name: ccc:nvidia
    - comment: {{ ("ccc:nvidia is not valid, nothing changed: " ~ plan.problems | join("; ")) | json }}
{%-   else %}
include:
  - .install
  - .upgrades
  - .persistenced
{%-   endif %}
{%- else %}
ccc-cluster-nvidia-off:
  test.succeed_without_changes:
    - name: role nvidia is off for this node (ccc:roles, ccc:only_roles)
{%- endif %}
