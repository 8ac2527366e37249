{#- Generic pillar top used by every site. The site's own pillar root provides `site` (cluster,
    user types, users, containers) and `site.nodes.<minion id>` (per-node data such as GPU groups).
    `ccc.beacons` and `ccc.schedule` (generic, this root) come first so that a site can override them.
    `site.secrets` (`ccc:secrets`, `#!yaml|gpg`, docs/secrets.md) is loaded when the site has one. #}
base:
  '*':
    - ccc.beacons
    - ccc.schedule
    - site
    - site.secrets
    - site.nodes.{{ grains['id'] | replace('.', '_') }}
    - ignore_missing: True
