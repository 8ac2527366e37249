ccc:
  user_types:
    student:
      access: restricted
      default_nodes: [node3]
      allowed_nodes: [node3]
      allowed_device_groups: [device_student]
      allowed_private_data_groups: [student]
    researcher:
      access: unrestricted
      default_nodes: [node1]
      allowed_nodes: [node1, node2, node3]
      allowed_device_groups: [device_lab]
      allowed_private_data_groups: [lab]
      allowed_private_data_mount_groups: [lab-shared]
