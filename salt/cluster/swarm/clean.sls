{#- swarm absent: the leader removes this role's unused overlays, then the node leaves the swarm.
    Never forced: a manager fails with how to demote it first (a forced leave can cost the swarm its
    quorum). Containers, images and user data stay. #}
{%- from tpldir ~ "/map.jinja" import swarm with context %}
ccc-cluster-swarm-clean-leave:
  ccc_swarm.left:
    - settings: {{ swarm | json }}
