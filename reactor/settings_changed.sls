{#- A user saved ~/.containers/<STACK_NAME>.yml (event from the ccc_settings beacon), a node
    announced that it now runs a moved container another node still keeps (ccc/moved/<STACK>),
    or a node's compute container crashed (ccc_docker beacon, died/<STACK>: the apply reports why).
    The ccc runner applies `containers` limited to that stack on every node where it may run, so
    a node it leaves removes it and a node it moves to starts it; it coalesces edits per stack,
    applies a file version several nodes report once, and rate-limits per user (the master's
    ccc.flush schedule applies what is left pending). The event carries only the STACK_NAME and
    the file's version (minion-supplied): they go to the runner as data (JSON, never YAML text),
    and the runner checks them (ccc_rules, the deployment's own rules); the settings themselves
    are read and validated on the minions. #}
{#- beacon events carry the stack at the top; event.send (ccc/moved) nests it under data #}
{%- set event = data if data.get('stack') is not none else (data.get('data') or {}) %}
ccc-redeploy:
  runner.ccc.redeploy:
    - args:
      - stack: {{ event.get('stack') | json }}
      - version: {{ event.get('version') | json }}
