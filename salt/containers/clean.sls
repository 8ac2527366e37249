{#- Remove every ccc-salt container from this node. Homes, settings and all other user data
    stay: deleting data is only ever done by DISABLED + PURGE_USER_DATA for one stack. #}
{%- for stack in salt['ccc_docker.managed']() %}
ccc-container-clean-{{ stack }}:
  ccc_container.absent:
    - name: {{ stack | json }}
{%- endfor %}

{#- The usage accounting schedule goes too; the logs in container-net-statistics stay (user data).
    offline: salt-call --local has no minion daemon to tell (see accounting.sls). #}
ccc-containers-clean-usage-accounting:
  schedule.absent:
    - name: ccc-usage-accounting
    - offline: {{ (opts.get('__cli') == 'salt-call' and opts.get('file_client') == 'local') | json }}
