{#- netplan absent: remove the role's netplan file and run `netplan apply`, so the addresses,
    routes, bonds and VLANs it configured can go away (the node may lose those addresses). #}
{%- from tpldir ~ "/map.jinja" import netplan with context %}
ccc-cluster-netplan-clean:
  ccc_netplan.config_absent:
    - name: ccc:netplan
    - settings: {{ netplan | json }}
