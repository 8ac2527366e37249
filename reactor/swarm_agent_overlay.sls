{#- The Portainer agents' swarm overlay (ccc:docker:portainer_agent:swarm; sent with event.send):
    ccc/swarm/agent_overlay/pending from a node whose agent finds it missing, .../created from the
    swarm leader once its agent made it. The ccc_agent_overlay runner applies the agent's overlay
    state once on each node waiting when the leader reports. The node is the event's minion id (the
    master checked it against the minion's key): passed on as JSON for the two tags alone, checked
    by the runner (id pattern, accepted key; for created: the ccc:swarm:leader). #}
{%- set node = data.get('id') %}
{%- set kind = tag.split('/')[-1] %}
{%- if node is string and tag in ('ccc/swarm/agent_overlay/pending', 'ccc/swarm/agent_overlay/created') %}
ccc-swarm-agent-overlay-{{ kind }}:
  runner.ccc_agent_overlay.{{ kind }}:
    - args:
      - node: {{ node | json }}
{%- endif %}
