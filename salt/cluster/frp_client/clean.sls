{#- frp_client absent: every frpc container of the role goes, with its secret env file. The log
    folder (ccc:frp_client:log_dir) and the frpc image stay. #}
ccc-cluster-frp_client-clean-containers:
  ccc_service_container.pruned:
    - name: frpc containers of the frp_client role
    - role: frp_client
    - keep: []
