{#- A minion returned a `state.apply` job or a fast redeploy (`ccc_docker.redeploy`, the function
    named by ccc_redeploy.FAST_FUN): a redeploy or node reconcile the ccc runner holds pending
    behind that job may go now (ccc.flush publishes it once every target returned), instead of at
    the next tick of the master's flush schedule (scripts/master_config.py), which stays for what
    no return ends (job timeouts, probes, the rate limit). Most returns find nothing pending. #}
{%- if data.get('fun') in ('state.apply', 'ccc_docker.redeploy') %}
ccc-flush:
  runner.ccc.flush: []
{%- endif %}
