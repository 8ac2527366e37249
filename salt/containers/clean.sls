{#- Remove every ccc-salt container from this node. Homes, settings and all other user data
    stay: deleting data is only ever done by DISABLED + PURGE_USER_DATA for one stack. #}
{%- for stack in salt['ccc_docker.managed']() %}
ccc-container-clean-{{ stack }}:
  ccc_container.absent:
    - name: {{ stack | json }}
{%- endfor %}
