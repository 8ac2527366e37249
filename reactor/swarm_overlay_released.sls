{#- A node removed a container of a stack that left pillar (ccc_docker.remove_orphans, event
    ccc/swarm/overlay_released sent with event.send, so the stack is nested under data). The ccc
    runner has the swarm leader remove overlay-<STACK> as soon as that node's endpoint has left it.
    The stack name is minion-supplied: passed on as JSON, checked by the runner. #}
{%- set event = data.get('data') or {} %}
ccc-swarm-overlay-released:
  runner.ccc.swarm_overlay_released:
    - args:
      - stack: {{ event.get('stack') | json }}
