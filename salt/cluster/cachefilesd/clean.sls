{#- cachefilesd absent: stop and disable the daemon, remove the role's files and the package. The
    cache folder is kept: it holds only copies of NFS data (no user data), but it may be an
    admin's dataset or mount (the sample's /data/nfs-cache); remove it by hand if wanted. #}
ccc-cluster-cachefilesd-clean-service:
  service.dead:
    - name: cachefilesd
    - enable: false

ccc-cluster-cachefilesd-clean-files:
  file.absent:
    - names:
      - /etc/cachefilesd.conf
      - /etc/default/cachefilesd
      - /etc/security/limits.d/ccc-cachefilesd.conf
    - require:
      - service: ccc-cluster-cachefilesd-clean-service

ccc-cluster-cachefilesd-clean-package:
  pkg.removed:
    - name: cachefilesd
    - require:
      - file: ccc-cluster-cachefilesd-clean-files
