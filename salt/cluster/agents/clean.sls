{#- The agents' install removed (/opt/ccc-agents: code, library, venv) once no agent runs on the
    node: every agent role (superfan_gpu, monitoring_agent) is cleaned in this run, or neither
    applied nor installed (its unit file absent). Included by those roles' clean.sls; runs after
    their agent stopped: each such role's clean has the state ccc-cluster-<role>-clean-service
    (service.dead of its agent's unit). The Debian packages stay. #}
{%- set plan = salt['ccc_cluster.roles']() %}
{%- set units = {"superfan_gpu": "ccc-fan-controller", "monitoring_agent": "ccc-gpu-exporter"} %}
{%- set keep = [] %}
{%- for role, unit in units | dictsort %}
{%-   if role in plan.apply or (role not in plan.clean and salt['file.file_exists']("/etc/systemd/system/" ~ unit ~ ".service")) %}
{%-     do keep.append(role) %}
{%-   endif %}
{%- endfor %}
{%- if keep %}
ccc-cluster-agents-clean-kept:
  test.succeed_without_changes:
    - name: {{ ("/opt/ccc-agents kept: role " ~ keep | join(", ") ~ " still runs its agent here") | json }}
{%- else %}
ccc-cluster-agents-clean:
  file.absent:
    - name: /opt/ccc-agents
{%-   set cleaned = units | select("in", plan.clean) | list %}
{%-   if cleaned %}
    - require:
{%-     for role in cleaned | sort %}
      - service: ccc-cluster-{{ role }}-clean-service
{%-     endfor %}
{%-   endif %}
{%- endif %}
