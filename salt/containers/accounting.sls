{#- Network usage accounting (the original CCC's 12-hourly job): a schedule on this minion runs
    ccc_usage.collect, which appends <now>:\t<rx>\t<tx> per running container to
    <user_data>/container-net-statistics/<STACK_NAME>-<node>.log. Pillar ccc:usage:
    accounting (on/off) and interval_hours (docs/pillar.md). #}
{%- set usage = salt['ccc_usage.settings']() %}
{#- Masterless salt-call --local has no minion daemon to hand the job to: the schedule is written
    to the minion's schedule file (offline), which the daemon reads when it starts. #}
{%- set offline = opts.get('__cli') == 'salt-call' and opts.get('file_client') == 'local' %}
{%- if usage.accounting %}
ccc-containers-usage-accounting:
  schedule.present:
    - name: ccc-usage-accounting
    - function: ccc_usage.collect
    - seconds: {{ (usage.interval_hours * 3600) | int }}
    - maxrunning: 1
    - run_on_start: False
    - offline: {{ offline | json }}
{%- else %}
ccc-containers-usage-accounting:
  schedule.absent:
    - name: ccc-usage-accounting
    - offline: {{ offline | json }}
{%- endif %}
