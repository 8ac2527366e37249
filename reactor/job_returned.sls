{#- A minion returned a `state.apply` job: a redeploy or node reconcile the ccc runner holds pending
    behind that job may go now (ccc.flush publishes it once every target returned), instead of at
    the next tick of the master's flush schedule (scripts/master_config.py), which stays for what
    no return ends (job timeouts, probes, the rate limit). Most returns find nothing pending. #}
{%- if data.get('fun') == 'state.apply' %}
ccc-flush:
  runner.ccc.flush: []
{%- endif %}
