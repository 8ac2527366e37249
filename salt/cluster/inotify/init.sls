{#- inotify: fs.inotify.* limits from ccc:inotify, persistent in /etc/sysctl.d/60-ccc-inotify.conf
    and applied now. A node that is a container says so (its /proc/sys may be read-only). #}
{%- from tpldir ~ "/map.jinja" import inotify with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("inotify", inotify, salt["ccc_inotify.plan"]) %}
{%- if plan.container %}
ccc-cluster-inotify-container:
  test.configurable_test_state:
    - changes: false
    - result: {{ plan.container.ok | json }}
    - allow_test_mode_failure: true
    - name: node is a container
    - comment: {{ plan.container.reason | json }}
{%- endif %}
{%- if not plan.sysctls %}
ccc-cluster-inotify-none:
  test.succeed_without_changes:
    - name: no fs.inotify value is set in ccc:inotify, the kernel's own values stay
{%- elif not (plan.container and not plan.container.ok) %}
{%-   for name, value in plan.sysctls | dictsort %}

ccc-cluster-inotify-{{ name }}:
  sysctl.present:
    - name: {{ name }}
    - value: {{ value }}
    - config: {{ plan.config | json }}
{%-   endfor %}
{%- endif %}
{%- endcall %}
