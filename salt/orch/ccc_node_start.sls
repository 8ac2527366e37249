{#- Orchestration run by reactor/minion_start.sls for one node (pillar ccc_node, the minion id of
    the start event). A list target matches that exact id only (never a glob). #}
{%- set node = salt['pillar.get']('ccc_node') %}
ccc-node-start-sync:
  salt.function:
    - name: saltutil.sync_all
    - tgt: {{ [node] | json }}
    - tgt_type: list
    - kwarg:
        refresh: True

ccc-node-start-reconcile:
  salt.state:
    - tgt: {{ [node] | json }}
    - tgt_type: list
    - sls: containers
    - queue: True
    - require:
      - salt: ccc-node-start-sync
