# Sample site: a 3-node lab. Copy this tree, edit it, and point pillar_roots at it
# (after ccc-salt's generic pillar/). Everything lives under the one `ccc:` key.
include:
  - site.cluster
  - site.user_types
  - site.users
  - site.containers
