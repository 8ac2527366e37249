{#- inotify: fs.inotify.* limits from ccc:inotify, persistent in /etc/sysctl.d/60-ccc-inotify.conf
    and applied now. A node that is a container says so (its /proc/sys may be read-only). #}
{%- from tpldir ~ "/map.jinja" import inotify with context %}
{%- if salt['ccc_cluster.role_enabled']('inotify') %}
{%-   set plan = salt['ccc_inotify.plan'](inotify) %}
{%-   if plan.problems %}
ccc-cluster-inotify-settings:
  test.configurable_test_state:
    - changes: false
    - result: false
    - allow_test_mode_failure: true
    - name: ccc:inotify
    - comment: {{ ("ccc:inotify is not valid, nothing changed: " ~ plan.problems | join("; ")) | json }}
{%-   else %}
{%-     if plan.container %}
ccc-cluster-inotify-container:
  test.configurable_test_state:
    - changes: false
    - result: {{ plan.container.ok | json }}
    - allow_test_mode_failure: true
    - name: node is a container
    - comment: {{ plan.container.comment | json }}
{%-     endif %}
{%-     if not plan.sysctls %}
ccc-cluster-inotify-none:
  test.succeed_without_changes:
    - name: no fs.inotify value is set in ccc:inotify, the kernel's own values stay
{%-     elif not (plan.container and not plan.container.ok) %}
{%-       for name, value in plan.sysctls | dictsort %}

ccc-cluster-inotify-{{ name }}:
  sysctl.present:
    - name: {{ name }}
    - value: {{ value }}
    - config: {{ plan.config | json }}
{%-       endfor %}
{%-     endif %}
{%-   endif %}
{%- else %}
ccc-cluster-inotify-off:
  test.succeed_without_changes:
    - name: role inotify is off for this node (ccc:roles, ccc:only_roles)
{%- endif %}
