{#- docker: the Portainer agent container (ccc:docker:portainer_agent), removed when switched off.
    AGENT_SECRET is read from ccc:secrets:portainer:agent_secret by the state, never rendered. #}
{%- from tpldir ~ "/map.jinja" import docker with context %}
{%- set agent = docker.portainer_agent %}
ccc-cluster-docker-portainer-agent:
  ccc_docker_portainer.agent:
    - name: {{ agent.name | json }}
    - enabled: {{ agent.enabled | to_bool | json }}
    - image: {{ agent.image | json }}
    - publish_ip: {{ agent.publish_ip | json }}
    - publish_port: {{ agent.publish_port | json }}
