{#- A node's Docker engine restarted or answers again (event from the ccc_docker beacon): its
    compute containers may have stopped, and after a reboot only Salt can pin their bind sources
    again. The ccc runner applies `containers` in full on that node, queued, with at most one such
    job queued or running per node (ccc.flush publishes a later request once it returned). The
    event carries no user data; the minion id it names (minion-supplied) must be the one in the
    tag, and goes to the runner as data (JSON), which checks it (ccc.MINION_ID_PATTERN) and only
    targets minions it knows. #}
{%- set node = data.get('id') %}
{%- if node is string and tag == 'salt/beacon/' ~ node ~ '/ccc_docker/restarted' %}
ccc-reconcile-node:
  runner.ccc.reconcile_node:
    - args:
      - node: {{ node | json }}
{%- endif %}
