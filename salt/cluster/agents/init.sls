{#- The node agents (the repository's agents/, served as salt://agents) installed under
    /opt/ccc-agents, shared by the roles that run them (superfan_gpu, monitoring_agent):
      bin/<agent>.py   every agents/*.py, mode 0755
      lib/             the _utils modules the agents import (ccc_agents.library: computed from
                       their imports on every render; nothing else is kept there)
      venv/            python3 -m venv --system-site-packages over Debian's python3 and python3-*
                       libraries, plus pip_packages (nvidia-ml-py) from pip's index or find_links
    The units run the agents with venv/bin/python and PYTHONPATH=lib. A role's service states
    use  - require/- watch: [sls: cluster.agents]  (any change here restarts them). #}
{%- from "cluster/agents/map.jinja" import agents with context %}
{%- set root = "/opt/ccc-agents" %}
{%- set venv = root ~ "/venv" %}
ccc-cluster-agents-packages:
  pkg.installed:
    - pkgs: {{ agents.packages | json }}
    - install_recommends: false

ccc-cluster-agents-root:
  file.directory:
    - name: {{ root }}
    - user: root
    - group: root
    - mode: "0755"

{#- (Re)made when missing or when the system python3 moved to another minor version (a Debian
    release upgrade leaves a venv of the old python behind). #}
ccc-cluster-agents-venv:
  cmd.run:
    - name: python3 -m venv --clear --system-site-packages {{ venv }}
    - unless: test "$({{ venv }}/bin/python -c 'import sys; print(sys.version_info[:2])' 2>/dev/null)" = "$(python3 -c 'import sys; print(sys.version_info[:2])')"
    - require:
      - pkg: ccc-cluster-agents-packages
      - file: ccc-cluster-agents-root
{%- if agents.pip_packages and opts.test and not salt['file.file_exists'](venv ~ "/bin/pip") %}

{#- test=True before the venv exists: pip.installed cannot look into a venv not made yet. #}
ccc-cluster-agents-venv-pip:
  test.configurable_test_state:
    - name: {{ ("would pip install " ~ agents.pip_packages | join(" ") ~ " into the new " ~ venv) | json }}
    - comment: {{ ("would pip install " ~ agents.pip_packages | join(" ") ~ " into the new " ~ venv) | json }}
    - changes: true
    - result: true
{%- elif agents.pip_packages %}

ccc-cluster-agents-venv-pip:
  pip.installed:
    - pkgs: {{ agents.pip_packages | json }}
    - bin_env: {{ venv }}
{%-   if agents.pip_find_links %}
    - find_links: {{ agents.pip_find_links | json }}
    - no_index: true
{%-   elif agents.pip_index_url %}
    - index_url: {{ agents.pip_index_url | json }}
{%-   endif %}
    - require:
      - cmd: ccc-cluster-agents-venv
{%- endif %}

ccc-cluster-agents-bin:
  file.recurse:
    - name: {{ root }}/bin
    - source: salt://agents
    - include_pat: 'E@^[^/]+\.py$'
    - user: root
    - group: root
    - dir_mode: "0755"
    - file_mode: "0755"
    - clean: true
    - require:
      - file: ccc-cluster-agents-root

ccc-cluster-agents-lib:
  file.recurse:
    - name: {{ root }}/lib
    - source: salt://_utils
    - include_pat: {{ salt['ccc_agents.library_pattern']() | json }}
    - user: root
    - group: root
    - dir_mode: "0755"
    - file_mode: "0644"
    - clean: true
    - require:
      - file: ccc-cluster-agents-root
