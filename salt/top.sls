base:
  '*':
    - containers
