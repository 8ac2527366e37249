{#- docker: the Portainer agent container (ccc:docker:portainer_agent) through the generic role-container
    state (_states/ccc_service_container.py); removed when switched off. AGENT_SECRET is read from
    ccc:secrets:portainer:agent_secret by the state, never rendered. The agent image has no shell, so the
    secret cannot come from the wrapped env file: it is the one inline secret env (secret_env_inline),
    visible to whoever may run docker inspect on the node (root). Only its presence is looked at here.
    The agent never gets docker.sock: its own filtering proxy (_utils/ccc_docker_api.py) passes the
    read-only dashboard calls (docker_api: read-only, the default; the volumes folder read-only too)
    or, only where the admin says docker_api: full, every call (host root for whoever controls
    Portainer). Another value fails the state, naming the choices. Swarm mode (agent.swarm, on a node
    whose swarm role is on) adds AGENT_CLUSTER_ADDR here; the swarm role attaches the agent to the
    agents' overlay afterwards (cluster/swarm, ccc_swarm.agent_overlay), so the spec keeps no overlay.
    The Portainer server (ccc:docker:portainer_ui, spec from _utils/ccc_portainer.py) gets no Docker
    API at all: it manages nodes through their agents; its database folder is made root-only. #}
{%- from tpldir ~ "/map.jinja" import docker with context %}
{%- set agent = docker.portainer_agent %}
{%- if agent.enabled | to_bool %}
{%- set has_secret = 'agent_secret' in salt['pillar.get']('ccc:secrets:portainer', {}) %}
{%- set full = agent.docker_api == "full" %}
{#- swarm mode: AGENT_CLUSTER_ADDR here; the overlay is joined by the swarm role (cluster/swarm) #}
{%- set agent_swarm = salt['ccc_portainer.agent_swarm'](agent) %}
{%- set spec = {
      "image": agent.image, "role": "docker", "former_roles": ["docker-portainer-agent"],
      "ports": {"9001/tcp": [agent.publish_ip, agent.publish_port | int]},
      "binds": [{"source": "/var/lib/docker/volumes", "target": "/var/lib/docker/volumes", "read_only": not full}],
      "docker_api": "portainer-" ~ agent.docker_api,
      "restart": "always",
      "env": agent_swarm.env,
      "secret_env": {"AGENT_SECRET": ["portainer", "agent_secret"]} if has_secret else {},
      "secret_env_inline": True} %}
{#- haproxy (Debian's) is the agent's Docker API proxy, run by systemd per container #}
ccc-cluster-docker-portainer-haproxy:
  pkg.installed:
    - name: haproxy

ccc-cluster-docker-portainer-agent:
  ccc_service_container.running:
    - name: {{ agent.name | json }}
    - spec: {{ spec | json }}
    - require:
      - pkg: ccc-cluster-docker-portainer-haproxy
{%- else %}
ccc-cluster-docker-portainer-agent:
  ccc_service_container.absent:
    - name: {{ agent.name | json }}
    - role: docker
    - former_roles: ["docker-portainer-agent"]
{%- endif %}
{%- set ui = salt['ccc_portainer.ui_spec'](docker.portainer_ui) if docker.portainer_ui.enabled | to_bool else None %}
{%- if ui and ui.problem %}

ccc-cluster-docker-portainer-ui:
  test.configurable_test_state:
    - changes: false
    - result: false
    - allow_test_mode_failure: true
    - name: ccc:docker:portainer_ui
    - comment: {{ ("ccc:docker:portainer_ui is not valid, nothing changed: " ~ ui.problem) | json }}
{%- elif ui %}

ccc-cluster-docker-portainer-ui-storage:
  file.directory:
    - name: {{ ui.spec.binds[0].source | json }}
    - user: root
    - group: root
    - mode: "0700"
    - makedirs: true

ccc-cluster-docker-portainer-ui:
  ccc_service_container.running:
    - name: {{ ui.spec.name | json }}
    - spec: {{ ui.spec | json }}
    - require:
      - file: ccc-cluster-docker-portainer-ui-storage
{%- else %}

ccc-cluster-docker-portainer-ui:
  ccc_service_container.absent:
    - name: {{ docker.portainer_ui.name | json }}
    - role: docker
{%- endif %}
