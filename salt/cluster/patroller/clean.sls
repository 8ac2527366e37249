{#- patroller absent: the claims container and the web UI's container go. The web UI's folder
    (occupancy_data.parquet, web-ui.json) stays: it is the claims history. #}
{%- from tpldir ~ "/map.jinja" import patroller with context %}
ccc-cluster-patroller-clean-claims-container:
  ccc_service_container.absent:
    - name: {{ patroller.name | json }}
    - role: patroller

ccc-cluster-patroller-clean-webui-container:
  ccc_service_container.absent:
    - name: {{ patroller.webui.name | json }}
    - role: patroller
