{#- mellanox absent: the role's apt repositories (list files and keys) go. The OFED driver stays
    installed: removing a network driver from a running node is a separate, deliberate step
    (ofed_uninstall.sh), planned with console access. #}
{%- from tpldir ~ "/map.jinja" import mellanox with context %}
{%- set names = (mellanox.repositories or {}) | select('string') | select('regex_match', '^([a-z0-9][a-z0-9._-]{0,62})$') | list %}
{%- if names %}
ccc-cluster-mellanox-clean-repositories:
  file.absent:
    - names:
{%-   for name in names %}
      - /etc/apt/sources.list.d/ccc-mellanox-{{ name }}.list
      - /etc/apt/keyrings/{{ name }}.asc
{%-   endfor %}
{%- else %}
ccc-cluster-mellanox-clean:
  test.succeed_without_changes:
    - name: role mellanox had no repositories; the OFED driver stays installed
{%- endif %}
