{#- A minion (re)started: sync the custom modules, then reconcile all of its containers
    (edits made while it was down are applied now). Ordered on the master by orchestrate, which
    targets exactly that minion id (a list target: no glob, no pattern to check here). #}
ccc-node-start:
  runner.state.orchestrate:
    - args:
      - mods: orch.ccc_node_start
      - pillar:
          ccc_node: {{ data.get('id') | json }}
