{#- Orchestration run by reactor/minion_start.sls for one node (pillar ccc_node). #}
{%- set node = salt['pillar.get']('ccc_node') %}
ccc-node-start-sync:
  salt.function:
    - name: saltutil.sync_all
    - tgt: {{ node | json }}
    - kwarg:
        refresh: True

ccc-node-start-reconcile:
  salt.state:
    - tgt: {{ node | json }}
    - sls: containers
    - queue: True
    - require:
      - salt: ccc-node-start-sync
