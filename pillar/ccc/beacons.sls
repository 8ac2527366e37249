{#- The ccc_settings beacon (_beacons/ccc_settings.py) on every minion: a user saving
    ~/.containers/<STACK_NAME>.yml fires salt/beacon/<minion id>/ccc_settings/<STACK_NAME>.

    The minion works out which files to watch from its own compiled `ccc:` pillar (`from_pillar`,
    through the execution function ccc_containers.watched_files): every container that may run on
    this node (user type's allowed_nodes + ALLOWED_NODES) and is not DISABLED. It is not listed
    here because a pillar SLS cannot read the pillar of the other SLS files (Salt 3008 renders each
    one on its own). Tunables: ccc:cluster:beacon:{quiet_period (0.15 s), poll_interval (30 s),
    max_delay (10 s)}. `immediate`: a change fires when its quiet period ends, not at the beacon's
    next call (Salt calls beacons once a second); about a second off every redeploy, no idle cost.

    Pillar `beacons` replaces beacons set in the minion config. A site that needs other beacons
    adds them under `beacons:` in its own pillar (dicts merge); a site that sets
    `beacons:ccc_settings` itself replaces this list (e.g. `- enabled: False`).
    disable_during_state_run must stay False (Salt would close the watches during every run). #}
beacons:
  ccc_settings:
    - from_pillar: ccc
    - immediate: True
    - interval: 1
    - disable_during_state_run: False
{#- The ccc_docker beacon (_beacons/ccc_docker.py): this node's Docker engine (ccc:node:docker_url)
    restarted or answers again -> salt/beacon/<minion id>/ccc_docker/restarted, at most once per
    min_interval (30 s) -> the master reconciles the node; a compute container crashed ->
    salt/beacon/<minion id>/ccc_docker/died/<STACK>, at most once per stack per died_interval
    (30 s) -> the master redeploys that stack, whose .deploy report then says why. Idle cost: one
    non-blocking recv on an open events stream per interval. #}
  ccc_docker:
    - from_pillar: ccc
    - interval: 1
    - disable_during_state_run: False
