{#- docker: apt repositories (none by default: Debian's docker.io), the engine and, on GPU nodes,
    the NVIDIA container toolkit. A package set pinned to a version (engine.version,
    nvidia_toolkit.version) is held there (apt-mark hold; a changed pin is installed through the
    hold); an unpinned set is not held, and a hold left from an earlier pin is released, so
    security fixes arrive with the node's upgrades. dockerd enabled and running. #}
{%- from tpldir ~ "/map.jinja" import docker with context %}
{%- set toolkit = salt['ccc_docker_host.toolkit_enabled'](docker) %}
{%- set package_sets = [('engine', docker.engine)] + ([('nvidia-toolkit', docker.nvidia_toolkit)] if toolkit else []) %}

{#- the repositories' names, sources and keys are checked by the role's schema.yaml (init.sls) #}
{%- for name, repo in (docker.repositories or {}).items() %}
ccc-cluster-docker-repo-key-{{ name }}:
  file.managed:
    - name: /etc/apt/keyrings/{{ name }}.asc
    - mode: "0644"
    - makedirs: true
{%-   if repo.key.startswith('salt://') %}
    - source: {{ repo.key | json }}
{%-   else %}
    - contents_pillar: ccc:docker:repositories:{{ name }}:key
{%-   endif %}

ccc-cluster-docker-repo-{{ name }}:
  pkgrepo.managed:
    - name: {{ repo.source | json }}
    - file: /etc/apt/sources.list.d/ccc-{{ name }}.list
    - refresh: true
    - require:
      - file: ccc-cluster-docker-repo-key-{{ name }}
    - require_in:
{%-   for what, _ in package_sets %}
      - pkg: ccc-cluster-docker-{{ what }}-packages
{%-   endfor %}
{%- endfor %}

{%- for what, packages in package_sets %}
ccc-cluster-docker-{{ what }}-packages:
  pkg.installed:
    - pkgs:
{%-   for package in packages.packages %}
{%-     if packages.version %}
      - {{ package }}: {{ packages.version | string | json }}
{%-     else %}
      - {{ package }}
{%-     endif %}
{%-   endfor %}
{%-   set pinned = packages.version is not none and packages.version | string | trim != '' %}
    - hold: {{ pinned | json }}
{%-   if pinned %}
    - update_holds: true
{%-   endif %}
{%- endfor %}

ccc-cluster-docker-service:
  service.running:
    - name: docker
    - enable: true
    - require:
{%- for what, _ in package_sets %}
      - pkg: ccc-cluster-docker-{{ what }}-packages
{%- endfor %}
