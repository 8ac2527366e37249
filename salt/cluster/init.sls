{#- salt '*' state.apply cluster: every cluster role this node runs, in the documented order
    (_utils/ccc_roles.py, docs/roles.md). ccc:roles switches roles per cluster and per node;
    ccc:only_roles limits one run:
      salt 'gpu*' state.apply cluster pillar='{"ccc": {"only_roles": "docker,timezone"}}'
    A role set to "absent" gets its clean state instead. #}
{%- set plan = salt['ccc_cluster.roles']() %}
{%- if plan.apply or plan.clean %}
include:
{%-   for role in plan.apply %}
  - cluster.{{ role }}
{%-   endfor %}
{%-   for role in plan.clean %}
  - cluster.{{ role }}.clean
{%-   endfor %}
{%- endif %}

{%- for note in plan.notes %}

ccc-cluster-roles-note-{{ loop.index }}:
  test.succeed_without_changes:
    - name: {{ note | json }}
{%- endfor %}

ccc-cluster-roles-summary:
  test.succeed_without_changes:
    - name: "cluster roles applied: {{ plan.apply | join(', ') or 'none' }}; cleaned: {{ plan.clean | join(', ') or 'none' }}; skipped: {{ plan.skipped | length }}"
    - order: last
