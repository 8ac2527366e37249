{#- A node deployed a container whose stack's swarm overlay does not exist yet (ccc_docker, event
    ccc/swarm/overlay_needed sent with event.send, so the stack is nested under data). The ccc
    runner has the swarm leader create overlay-<STACK> and redeploys the stack, so every node
    attaches it. The stack name is minion-supplied: passed on as JSON, checked by the runner. #}
{%- set event = data.get('data') or {} %}
ccc-swarm-overlay-needed:
  runner.ccc.swarm_overlay:
    - args:
      - stack: {{ event.get('stack') | json }}
