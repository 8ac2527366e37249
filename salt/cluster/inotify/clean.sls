{#- inotify absent: remove the role's sysctl file; the kernel keeps the current values until
    the next boot, which uses the distribution's defaults again. #}
ccc-cluster-inotify-clean:
  file.absent:
    - name: /etc/sysctl.d/60-ccc-inotify.conf
