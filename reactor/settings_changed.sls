{#- A user saved ~/.containers/<STACK_NAME>.yml (event from the ccc_settings beacon), or a node
    announced that it now runs a moved container another node still keeps (ccc/moved/<STACK>).
    The ccc runner applies `containers` limited to that stack on every node where it may run, so
    a node it leaves removes it and a node it moves to starts it; it coalesces edits per stack and
    rate-limits them per user (the master's ccc.flush schedule applies what is left pending).
    The event carries only the STACK_NAME (minion-supplied, so it is checked here with the
    runner's own pattern, ccc_containers.STACK_NAME_PATTERN, and again in the runner); the settings
    themselves are read and validated on the minions. #}
{#- beacon events carry the stack at the top; event.send (ccc/moved) nests it under data #}
{%- set stack = data.get('stack') or (data.get('data') or {}).get('stack') %}
{%- if stack is string and stack is match('[a-z0-9][a-z0-9_.-]{0,62}$') %}
ccc-redeploy-{{ stack }}:
  runner.ccc.redeploy:
    - args:
      - stack: {{ stack }}
{%- endif %}
