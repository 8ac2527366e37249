{#- A minion (re)started: sync the custom modules, then reconcile all of its containers
    (edits made while it was down are applied now). Ordered on the master by orchestrate. #}
{%- set node = data.get('id') %}
{%- if node is string and node is match('[A-Za-z0-9][A-Za-z0-9._-]{0,252}$') %}
ccc-node-start-{{ node }}:
  runner.state.orchestrate:
    - args:
      - mods: orch.ccc_node_start
      - pillar:
          ccc_node: {{ node }}
{%- endif %}
