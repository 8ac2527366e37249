{#- Periodic full reconcile on every minion: catches anything the beacon and reactor missed
    (an event lost while the master was down, a container someone removed by hand).
    A site changes the period by setting schedule:ccc-containers-reconcile:minutes in its
    own pillar (dicts merge), or switches it off with `enabled: False`. #}
schedule:
  ccc-containers-reconcile:
    function: state.apply
    args:
      - containers
    kwargs:
      queue: True
    minutes: 5
    splay: 60
    run_on_start: False
    return_job: False
