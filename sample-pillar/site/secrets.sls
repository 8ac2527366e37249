#!yaml|gpg
# DEMO secrets of the sample site, encrypted to the DEMO key in sample-pillar/gpgkeys/ (public:
# anyone can decrypt them). Every value is a dummy. A real site encrypts its own values to its
# salt-master's key (scripts/ccc-secret encrypt, docs/secrets.md) and never uses this key.
ccc:
  secrets:
    registries:
      registry.example.org:
        username: |
          -----BEGIN PGP MESSAGE-----

          hF4DfYkntwAVC48SAQdAC+2WhLZ5bymtorIImoxNRG49CMzSvAZRY12DKQfjFnow
          81jLcpUvtbOFYbLzfFcaaw7mZEeVYyehWENUJfqh7vL7HoRwv4DtfwJx3jaynuAV
          0k0BW72Yr7uwPathLKPjC5HJY4nWhNqnP2zWdD/5rHewIudr1cWbolyjwBY/VON3
          G2a6JF4pe/LO/TPGjsA38lt2qm4HdeU+NExQmu6N3w==
          =BebZ
          -----END PGP MESSAGE-----
        password: |
          -----BEGIN PGP MESSAGE-----

          hF4DfYkntwAVC48SAQdAD1B3uSXW/TlVc0pZXTebtk7W4Y+v9LrXRC6yvY9l9Q8w
          xMwxOXp7QfMGWjBMScya/Tj2Zt/g3c+ZSP5kkFs2zsyk9/bBZUqhEMEe/4bq7y0W
          0lEBgLUD19O976JUnJB+v2In4dYhfRygwHZBB2ScWesLBvkNOdzukqHWVVEvXwph
          BLqhnsvklb4bo10pEVVajzxKfNnHIze3zvMAskIVwWaq0MA=
          =ZisQ
          -----END PGP MESSAGE-----
    portainer:
      agent_secret: |
        -----BEGIN PGP MESSAGE-----

        hF4DfYkntwAVC48SAQdAk9Z4xYcTXf8T4rTlqK+0J12NeHgwXPxC/BwGDg1QmUEw
        h5peNsxkLQZhXeh8FUjl0ahP+sbpx6saYh4Qd+RWsCkdRd1xD4IP6uHNc4z0E136
        0lYBp4RTBo5SSmoIo25DQ/AnY9L20zU38+ViDlRnyhO8MMAqYUUHH+COJFveWqWo
        CWze4ynttXkFcRkCQpPbPDwP0BsXQIL9XTF8d1Z1KksanQky2Xbx/g==
        =E37w
        -----END PGP MESSAGE-----
    frp:
      token: |
        -----BEGIN PGP MESSAGE-----

        hF4DfYkntwAVC48SAQdAnS3Oz4DuPg72AtmhUSNP+qtkKjOiBpit7bRXstO0siow
        8S6YBjQ23QWrMffbE5bFdpST2POZkmqM3nRYl/EOGy90xf5VsIwmxxLn3ZRx/XgZ
        0kkBbYYzZXgLXQvBq/tlLBnKkd5XYfZw5/G1mwp5/K+kYnhIVpio52fDvm/Qr7W4
        SmmfWcpNB8NwyrJLaFmMv5XTx4bNMMU4z5mw
        =Dj5R
        -----END PGP MESSAGE-----
    basic_auth:
      monitor:
        user: |
          -----BEGIN PGP MESSAGE-----

          hF4DfYkntwAVC48SAQdATGKBMXGhNMFKr9CSfOzh0LqaJCrzmQVZdlbwDRmTwGow
          98kNS0hxGVyCEl7GeAKOGoPwWkR5jNd1uk+4/ejpkJWBPsmMdiEke0FL9t+basQd
          0kwBc27nNpGXPGMejx8Xzs+eMoVWt3jW4IDEUGM441VFPMkzfkNTlO4pYH/AXn8u
          y4bOS0WqLXwZQovMN0hI98HF32yGrdiTYiVEza36
          =6XbR
          -----END PGP MESSAGE-----
        password: |
          -----BEGIN PGP MESSAGE-----

          hF4DfYkntwAVC48SAQdAXmPDkp+4c5z2j+hqDE9iX3gu/MXM6ry1+ZcV/AhMTVQw
          2Hb6bbFcDbJK3KJ1EQ7iEtwJqM7lX9lY9TLLrSOr5juTDRa3EH4x4DnJo4kJw1ah
          0lAB4agJr8YXZ2iVVh2BoU0nv9XAxaioRt1sZngkB+qD2Mu3i1xg9MiYx46xvNm6
          VU+c580c1y3KtDpXRiDErW40U4xU81C6gz+SeOl4miQNfA==
          =0dwi
          -----END PGP MESSAGE-----
      metrics:
        user: |
          -----BEGIN PGP MESSAGE-----

          hF4DfYkntwAVC48SAQdAGx8+t+cXHYZu+2r8GvjOLhHnrdjC2lglXx8aeEuuh0Iw
          pqJyFz8h1dTnIKV4spctDOdCN8WGK6Glshv8rMqy0OkXYKuEDpY+ZdkxzqYdgZGE
          0kwBX9M6IstyX/uxn0Efp9NhhXOPzTErTHHIPPq/gYp+PfRQi0FGNIssThtDeNt9
          0Rs0lrCMRWVEiwuuVgqJLuJnciCMTPHZHeRSFoTL
          =dNpt
          -----END PGP MESSAGE-----
        password: |
          -----BEGIN PGP MESSAGE-----

          hF4DfYkntwAVC48SAQdA4l0ErZr7hVl5J6URdw1YH31fZLU36dVQJtE7sbB4fRsw
          H+AISFvCPBpCU+bvNnYE829Zggzc/3ZEwDh+Fof9AgjVf9ZQKBquAUhMOFEHXa+i
          0lABqrq6IGhGuYAA7pNSUx9qx0rQ6UCASt1/EoQzNF7G1kOqCXW2qrq0lQkRb45V
          5tkzjo/DHGalUq7OZMGXmIi8mBG3UH3xzo1Z+FJdHlpfVA==
          =QaH9
          -----END PGP MESSAGE-----
    swarm:
      worker_token: |
        -----BEGIN PGP MESSAGE-----

        hF4DfYkntwAVC48SAQdA3qcw8uStXtGPFyKI826EjxEHm7liejKZW7GnNepV9FQw
        /Y3GdkppBr2N7Bc50j1j0zx1L+Nj/JLuqwZtTiRdCXNNLc76h2wffigb+LeS9ur2
        0lIBTgOTClglrxadiLY7sHcwvEH2oLHyDORVISoYbClRCIKJX9UfstFkHn5fsv6U
        9z25tIw6InoRwltdP93JIED9/iawDuQISw8pQkrAN2naBM3H
        =F0qp
        -----END PGP MESSAGE-----
