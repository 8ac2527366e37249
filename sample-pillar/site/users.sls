ccc:
  users:
    ana.novak@example.org:
      USER_FULLNAME: Ana Novak
      USER_NAME: ana
      USER_TYPE: researcher
      USER_PUBKEY: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeSampleKeyForAnaOnly0000000000000000000 ana@laptop"
    bor.kralj@example.org:
      USER_FULLNAME: Bor Kralj
      USER_NAME: bor
      USER_TYPE: researcher
      USER_MENTOR: Ana Novak
      ADDITIONAL_DEVICE_GROUPS: [device_student]
    cene.zupan@example.org:
      USER_FULLNAME: Cene Zupan
      USER_NAME: cene
      USER_TYPE: student
      USER_MENTOR: Bor Kralj
    dara.kos@example.org:
      USER_FULLNAME: Dara Kos
      USER_NAME: dara
      USER_TYPE: student
      USER_MENTOR: Bor Kralj
