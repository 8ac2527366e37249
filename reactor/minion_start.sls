{#- A minion (re)started: the ccc runner syncs its custom modules and reconciles all of its
    containers in one queued job (edits made while it was down are applied now), coalesced and
    rate-limited per node with its other full reconciles, so a minion restarting in a loop does
    not get a job per start. The id is minion-supplied: only an event whose tag names the same
    id as its data goes on, as data (JSON); the runner checks it (ccc.MINION_ID_PATTERN, an
    accepted minion key) and targets exactly that minion (a list target: no glob). #}
{%- set node = data.get('id') %}
{%- if node is string and tag == 'salt/minion/' ~ node ~ '/start' %}
ccc-node-start:
  runner.ccc.node_start:
    - args:
      - node: {{ node | json }}
{%- endif %}
