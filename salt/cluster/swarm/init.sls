{#- swarm: this node in the cluster's Docker Swarm (init on ccc:swarm:leader, join elsewhere with the
    token from ccc:secrets:swarm), and on the leader one attachable, internal overlay network per
    STACK (overlay-<STACK>) that may run on a swarm node; the containers state attaches each
    container to its stack's overlay with the node name as alias. Needs the docker role's engine. #}
{%- from tpldir ~ "/map.jinja" import swarm with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(plan) role("swarm", swarm) %}
ccc-cluster-swarm-member:
  ccc_swarm.member:
    - settings: {{ swarm | json }}

ccc-cluster-swarm-overlays:
  ccc_swarm.overlays:
    - settings: {{ swarm | json }}
    - require:
      - ccc_swarm: ccc-cluster-swarm-member
{#- the Portainer agent's swarm mode (ccc:docker:portainer_agent:swarm): its agent on the agents'
    overlay as <node>_agent, made by the leader's agent only; a node that finds it missing says
    pending and the master applies this ID there again once the leader made it (runner
    ccc_agent_overlay; keep the ID: _utils/ccc_agent_waiters.AGENT_STATE names it). Off: detached,
    and the leader removes the overlay once no agent uses it. After the docker role's agent
    container (cluster order). #}
{%- set agent = salt['ccc_cluster.role_settings']('docker').get('portainer_agent') or {} %}

ccc-cluster-swarm-portainer-agent:
  ccc_swarm.agent_overlay:
    - name: {{ agent.overlay | json }}
    - container: {{ agent.name | json }}
    - wanted: {{ salt['ccc_portainer.agent_swarm'](agent).on | json }}
    - settings: {{ swarm | json }}
    - require:
      - ccc_swarm: ccc-cluster-swarm-member
{%- endcall %}
