{#- cachefilesd: Debian's FS-cache daemon (what NFS mounts with fsc cache through), its config
    (cache dir, tag <node>-cache, culling thresholds checked by _utils/ccc_cachefilesd.py), RUN=yes,
    the cache folder and the service (state: stopped, the original's cachefilesd_state: stopped and
    disabled instead). Without the kernel's cachefiles module the daemon cannot run: the package and config are set and the role fails saying so. Nothing is written while a setting is wrong. #}
{%- from tpldir ~ "/map.jinja" import cachefilesd with context %}
{%- from "cluster/macros.jinja" import role with context %}
{%- call(config) role("cachefilesd", cachefilesd, salt["ccc_cachefilesd.config"]) %}
{%- set stopped = config.state == "stopped" %}
{%- set no_kernel = not stopped and salt['ccc_cachefilesd.kernel_support']() %}
ccc-cluster-cachefilesd-package:
  pkg.installed:
    - name: cachefilesd

ccc-cluster-cachefilesd-cache-dir:
  file.directory:
    - name: {{ config.cache_dir | json }}
    - user: root
    - group: root
    - mode: "0700"
    - makedirs: true

ccc-cluster-cachefilesd-conf:
  file.managed:
    - name: /etc/cachefilesd.conf
    - contents: {{ config.conf | json }}
    - user: root
    - group: root
    - mode: "0644"
    - require:
      - pkg: ccc-cluster-cachefilesd-package

ccc-cluster-cachefilesd-default:
  file.managed:
    - name: /etc/default/cachefilesd
    - contents: {{ config.default | json }}
    - user: root
    - group: root
    - mode: "0644"
    - require:
      - pkg: ccc-cluster-cachefilesd-package

{%- if stopped %}

ccc-cluster-cachefilesd-nofile:
  file.absent:
    - name: /etc/security/limits.d/ccc-cachefilesd.conf

ccc-cluster-cachefilesd-service:
  service.dead:
    - name: cachefilesd
    - enable: false
    - require:
      - pkg: ccc-cluster-cachefilesd-package
{%- else %}

ccc-cluster-cachefilesd-nofile:
  file.managed:
    - name: /etc/security/limits.d/ccc-cachefilesd.conf
    - contents: "# Managed by ccc-salt (cluster role cachefilesd): FS-cache keeps many files open\n* soft nofile 64000\n"
    - mode: "0644"
    - makedirs: true
{%- endif %}

{%- if no_kernel %}

ccc-cluster-cachefilesd-service:
  service.enabled:
    - name: cachefilesd
    - require:
      - file: ccc-cluster-cachefilesd-conf
      - file: ccc-cluster-cachefilesd-default

ccc-cluster-cachefilesd-kernel:
  test.configurable_test_state:
    - changes: false
    - result: false
    - allow_test_mode_failure: false
    - name: cachefilesd not started
    - comment: {{ ("cachefilesd is installed, configured and enabled, but not started: " ~ no_kernel) | json }}
{%- elif not stopped %}

ccc-cluster-cachefilesd-service:
  service.running:
    - name: cachefilesd
    - enable: true
    - require:
      - file: ccc-cluster-cachefilesd-cache-dir
    - watch:
      - pkg: ccc-cluster-cachefilesd-package
      - file: ccc-cluster-cachefilesd-conf
      - file: ccc-cluster-cachefilesd-default
{%- endif %}
{%- endcall %}
