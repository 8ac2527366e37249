{#- Deploy every selected compute container on this node.
    Filters (pillar, like the original's extra-vars):
      salt 'gpu*' state.apply containers pillar='{"containers": "box1,box2", "users": "a@b.org"}'
    Only STACK_NAMEs that passed validation and network names from admin pillar are rendered
    here; user settings files are read by the Python modules, never by Jinja. #}
{%- set selection = salt['ccc_containers.selection'](salt['pillar.get']('containers'), salt['pillar.get']('users')) %}

{#- The networks containers join are the docker role's (one owner, created and checked there).
    accounting: the schedule of the network usage log (ccc:usage). A filtered run (the redeploy
    of one stack after a settings edit) leaves accounting and orphans to the unfiltered ones (the
    full reconcile): every file an apply renders is a request to the master on that path. #}
include:
  - cluster.docker.networks
{%- if not selection.filtered %}
  - containers.accounting
{%- endif %}

{#- Plans and applies every selected container, several at a time (ccc:node:create_parallelism);
    each container's own state below reports its outcome. No require on the networks: when the
    Docker engine is down every container still runs, fails with a reason the user reads in
    .deploy, and counts in the summary. #}
ccc-containers-deploy:
  ccc_container.deployed:
    - stacks: {{ selection.selected | json }}

{%- for stack in selection.selected %}
ccc-container-{{ stack }}:
  ccc_container.running:
    - name: {{ stack }}
{%- endfor %}

{#- Orphans are removed only on unfiltered runs and only when pillar does list containers. #}
{%- if not selection.filtered and salt['pillar.get']('ccc:containers', none) is not none %}
{%- from tpldir ~ "/map.jinja" import cluster with context %}
ccc-containers-orphans:
  ccc_container.orphans_absent:
    - enabled: {{ cluster.remove_orphans | json }}
{%- endif %}

{#- After the containers: live private groups inside each running container's private pin, and
    pin sets of containers that are gone released. SSH host keys are per STACK_NAME, made by
    ccc_container.deployed (ccc_hostkeys). #}
ccc-containers-private-mounts:
  ccc_container.private_mounts_managed: []

ccc-containers-summary:
  ccc_container.summary:
    - errors: {{ selection.errors | json }}
    - order: last
