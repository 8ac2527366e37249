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

          hQGMA5BSrc6gwmwwAQv/dzwpZciI4RTNtbsajPSyjYpdGox/mgq1f0IU86VX6p3j
          qR/x640BVRmBD0PYEbBOJ9WjARoJlaahkRhgUd3nszxx95HDEf3x273at/byVzJ4
          J1cJvBKlBMvhoka5XK9NHKVvdqK4C5AflOT2uZQnkJtmrRHCOuoS2akSrNxuxuVq
          uw78ikYKcpJ6+lt5m4VIPBlLEyxViI45UwqF2GbiiHKVsNLv9O+l6nrR5fLq/k6J
          6JaVp8RsRWEkos5DAEUWlNX8Cvhh4Q8fmqkjXtIgojjmzypHX8a85tkXC/7fxWkk
          LVN9IVGJOGXhFaSZ7lVBJK+rSGOKRRaxToDlRCRGidJWKudTk2b7VlV85mVT0X3W
          lEscHzXFsZPnHXB3NH/kGWCO59EBNAfUKVDJ+kea7cwncIVME9cAsfSDsc4pZtec
          eCGXgRGj3t6gPU62Oz3n8PA7lJFuxxga57RNsgFaiGuzdXvaHlADHQTvbBK6M7A2
          JaWEbjfK751mwbcMmEAv0k0B+1onljix6nii07Sb9P3LICoF49PQxJhsS/S3feMb
          8BoEy1MCCCYldY5QFcQ3qN5Jiz3sHZWewNdREUSzwt6Dgz95W/8I3dr6FUdr3g==
          =AJNf
          -----END PGP MESSAGE-----
        password: |
          -----BEGIN PGP MESSAGE-----

          hQGMA5BSrc6gwmwwAQv+PXhzgm8zvgwtiNyLBEDgsKmgkBbfSOZDQQqF7ClwmyZP
          rzSDjUjvC6wz4wV/mbP6YP+CJHo018jwDjbW3jNIsJ7wY4/gIiQajeDvqjH6tNL9
          IpUmUZMvgReLpxovMUvWoOHtYdxSygFBmRgGa8uYMPwS67/aIMZlWmLJOemV6+Gb
          Q1zeLuI1VO43wRaJEMKnCYNFFfuJbwGz9FFyJ9onKZAm/ri4IMsuZG6/9+Owjuhr
          WJ69Y6CXCvysQ2jmsnRDZjeZ1BuRbXG4N8M4/iBHipxmlU/pvkjEKoEphmcvlG7C
          P/ksD/m6dtOA1S4rlzJv133c3q8rI1hr8zsK+D4pmxYz6HC7YjmIYRebcSuKqQJz
          BfKh4Sr5vRX6M029cNTqwaKOVtNJfYjvXHQARNEQXI2foP5FMJPgLdunbo6P7+YD
          Rkk4/BxOpfnGo6W1pNRkpl51gN9HiyDIgO/GgEOEue6hTG51hhL6pJtkBvn7aJ1b
          RM91aaXukLuO6MQvy7Wt0lEBeg+RKZBf3eo2Ahotwap2NtbMttZTsHHK393JN7Z3
          3x/yS6ExIbdSdZf6lT14h6q9HMawVXDrO06gBCQ3L/ihGQuKLhPmiFBHpAhLJMg3
          Xh0=
          =wr5O
          -----END PGP MESSAGE-----
    portainer:
      agent_secret: |
        -----BEGIN PGP MESSAGE-----

        hQGMA5BSrc6gwmwwAQv8CFJ0/X+V5r5TaTzIuQWfdWRjYGdyBHtom/x1NxVxf6OD
        RTTl2I7g1KBCcdGwxhVPtCSJrxDd8YLjlHzrcnn1zricxLsmjKqsvu0AWLNAimTA
        fddS9JKNgIkArYmgF5pbHM8VpGTFuJpR8euKTBQWLdN6em+M4Rrpu3bmjBC0rFNc
        TTSkBzPj2/r6zp2z35CDzSQlWioNAMIbbzyT9eqMoH6OL2pnTEWGBjtp3kL473fq
        xL8w711aMZ7hDCBhD7DBYi8HA749un4EuF+D5K+taM301QMWgKyWz+P6BBBRNToe
        0hR+TPYAWaWeLvOWb/w1mi0m0Ti8e5FnxERMwUX7xR7bWLRfGuyMynBBIY0gm3Kv
        weuZ4OPEkZ8VVbFgblvMk4zrUs2CovuxXsp9BLKQ/9t/ZVYOdBJ8CVE6Iy8B3S+P
        BE50eZxgE7VOqHSZgZ8oYbDq3O8fgQzd4rw8Fcq1YsQ37RjnknHPLyeV612mgjZ8
        2qisqYB2Lf7paj8pKuHu0lYB+82Ya5xuVxhcHWuOZe00qlCKnkDM6p2LQmsPJPiu
        IgQKjq3ZVj/45lHD2t4hbqf4WjQqspu4ivZ5/vQ/26Ycoo276C7eAsb5yfXGeTfg
        Vs7DbhTuIQ==
        =+gnn
        -----END PGP MESSAGE-----
    frp:
      token: |
        -----BEGIN PGP MESSAGE-----

        hQGMA5BSrc6gwmwwAQv+OKw39KrrI4HzY4sK6uLeg1AZYiNp6wb7qhaH9hbf9PIA
        6MlqYItHF0RLLgxR7ZCUpsuXH4U24qMiVJ9082Ht28OsCOElxpTc5u4fHONby6nA
        +JFXog7aZqbr7Hn/FWXyTQmmhG5X37OyBsINyRMzaxIH1636+ptD09sjcf4klPhs
        9ERykRbFsPbI/gDa8vFPOeEKRAoSBmAlPdaDK+9Y87bKrvI1946XRls6Bie1aXM3
        CcBG3ZlYCV1xjshYTN26HEf6y0eqqPuLTRbVF/v5/4k3ONR6edTVqHLv18/Bx8ei
        vb62FrCb7lLUprRp09ZmmsmzDD8tMzC7B26cV4SnNIaLf3A8mFkT964PoFDjZbQc
        IMqn/1aZLDa3GBCZLhZPHSLX9f0Q/WkUhTtR8A+p4kGLABil3zyviTyN33mlo57O
        TqjH8x1y5P0Dn8nFUqRgvZVvbMHHB5Ea4n74kEa7iIXsJEC2UTxPNiKhugzxOL6F
        62uXAAueOXhucuBXrTxo0kkB8jQyZRePRnKDQJ+NgSYNXLoVeUZrHTw2MmPoLhHA
        6YYqIZf8POltfOYdrZyiI7u1kRPO1Uqf4FLsTWEnlrXLwLc8N3gqioK9
        =z45h
        -----END PGP MESSAGE-----
    basic_auth:
      monitor:
        user: |
          -----BEGIN PGP MESSAGE-----

          hQGMA5BSrc6gwmwwAQwAonsNypMTgicH0CmH4tUmWvWDHApWTMnOWc1icaWkYazw
          pSd9+o6g4m0yhhp+04dei47KqYpcN5wd1n09WWG4EwwPVwUb4GkBRe446LNsecaX
          qQCU1S9f+Vat+qDl5+EzYkdDubY605Hduooq8/VcK9FUVL5D3wgNfMBPrK0A04BD
          nmS6j0yZyxWVlBFCYS0o15VYKFZCbbnI/Cn3ePxNoeTkFOYG3zWhi2fgP7sF+UYQ
          W3eiZys0lXHHWAl1L60f/Nj0oCi1eLox4gh6mN7ajciP5vO3CB1fEopU+oOLdh2y
          bswiFGQdMs+AXvw+F5YUOlnIEPwLxCykoEXemEsRcmaxs47QPO7zo8Le+ScMB+uM
          VxaylTOo9OsgQLFuISGYBVIuOaj0fUKVIDW9So+vgnAfGyJOo7hyNdIpc3c9y+oi
          ONL+O09QYf5jKp7H97zBH01Ic/lABni4DGbi3t7uAUx/s4IgOh0Q2fdqBC1kHtq+
          qz/N8XCCr64Yd43dX/Qa0kwB96WqSE2mNCZfQcxGO+YNozCFdrIUhdZvUQ4Z1FwC
          3dDEwICi5hOKF+4yPz+G4zk9UN+1i93aNM6/jHi6VpVK/gyJ143CramBlSq2
          =eI+W
          -----END PGP MESSAGE-----
        password: |
          -----BEGIN PGP MESSAGE-----

          hQGMA5BSrc6gwmwwAQv+Nh2DDSSIyamU2jegbLdgmld9IS4w+/PkPZBO5OoW3NN7
          XAirPTku9JtzoRgyp39lIJvtQeEchOoVc96won7UTkj0IEgDAuJZ0LjtK8DxlXk3
          QBhj5jhsV9haYzIZLHez73wUD2DXVZnJNnoBb0KymAVRaoUR4VnSjKPO21Xgb4i9
          jvYYixUOIZqhT6yGeUQMkT8mPq/3/HriGLy6z/sMWIqFPbSiORprhu/IYojoDF4y
          ii74xPySuLoYh7lx9BLYu1giJiAbDt0PCPRPNAcaCzULPRJ6cPquGDgou8cIkLRP
          u1prUKB7f4ApAk7prP2/uSz0hsx6gk26xil2KakEGyWBZGiBAeZGmafO8mqVbpAX
          W0THe5mdSTDk7k1Na8iLBN9YLmIIjrA/bwwHEKiNEKpC4JfRg57jRnn4/5maNcJG
          CsvBQWLNTI8fYN67JlfIJxmZWLQvj0jQcrWTde96mloqMJVhNbPVCQ1wo52ir5xu
          1jPpf6PN7Z0MEzBJWwfh0lAB663P952KBZi0WNkzJCcDWFtTNS/Anl7RRctTzpGN
          ZTJdUEjUv3E6bA30eGSluyrJMNhu9Cn97aauZKc4wx16YUHaOG1sT7fER6tUbjp7
          3w==
          =xVR0
          -----END PGP MESSAGE-----
      metrics:
        user: |
          -----BEGIN PGP MESSAGE-----

          hQGMA5BSrc6gwmwwAQv/VQZlXxTgoe9LhuOp5wGyXA+16R4T9i1cbqDgUhWTz6BY
          y/JD+xMjwsCgj8N8PQJPyBXD2XJC6Yg+oRRYhHeGY/bOTRp03YHqjuNddZkqjiJh
          6H54pEKrz9fZHYSrFYd8C8jxYBf4wYXIwN4A1eGfVaeEb8PcYsjt//l65z6yBRVf
          a93A2Va7Fjbvs3fl98o3lkiB48Rx3hrQYzyCCTdACNOPY4qOl2Ri3F/+WT0/YQRl
          3x5DxjBpvzjrE+PwS1dTUVQKxE834fHaSJI6x6bep7EIbSLClpIR8UkGFbtva8H8
          grgl80g7MeCpJeQSt3oLJY5smZP1akYJOOvw9s+sKzFGMG/5dJkH1o4bBvWi+K6x
          SLKu5LY0ONMW99nrKLM4qJdR2AWdzmO44UuuuKS+Tv5nmSGPOrbcqlrGJoy+ERox
          FZFSjl5E9wU8XYkx0C1yG3OlxO1sqV7YUyVkIlwfmw5YivYG+eVxiaAaYQ2vcnr7
          RChNwQ+9J2ZWOqQxFAc40kwBOb5Z0mJSNBgheNiWdbHSeHkUTsMEeEsIoZWPdq5F
          hpGnCxMWk+FFlN2m+rpyzKS5tISuISdaosTB/2s8ptozSfMQmvnMtSeUgoDJ
          =krke
          -----END PGP MESSAGE-----
        password: |
          -----BEGIN PGP MESSAGE-----

          hQGMA5BSrc6gwmwwAQv/XWCY3EebaEoPTGw34iq2xqHgt+Oj4Ftfmsi7aOkZqxKv
          riqdraoDzUanUdPsXVi3DTxL4HdCEbdVblCwP3W3xRlw/ftAXBYSypZQ2Sg0H6GS
          E1UN/T29Gm1DHYRrHiTLfR8aR6TbcMBSwBBNvA4GWLbaTjbUWDGo+m7qM1SVSzZK
          Msa4UIvKTcC888hxiCA4BgnCPqD4A9IYNrAZxWUvrmLpMPT01hHezTGTdjEB1gMo
          /yZyiLSIg15b0o+8kLW0VD4URN0K3JqgE2Wghr+3wY4xiKgxwAwGhxCoYfmG5gG6
          Ge21NSMbN0zCz8NO9/UH0rFvIuEEFxTIU34tXPJgVSiZnDp9JgMxWI8l1FcIrVqA
          mLCIX/WzPrElpccq0E8Z7bSCiHd2WxFXlF4tNtXf0dUxGG8Fak+ae0G+ieD8Er0g
          /3q93N6xIkaJJ7cHh6yLNIwkoPDNqsIIp99cYqKDska1jL1CA1oilN0IxhaDT5Gx
          8VE3uUN0cXTh4DrJWVm60lABP4p3Sfmdi5yFFGSxibiEmQuCO9EfqiRGK8u0AO22
          wFoIgh3CaNPNQ7OBROApF/5f2EEUDpOh0FzycP1kCw81kYPFli5S0aHu183/+Zj3
          oA==
          =xNHd
          -----END PGP MESSAGE-----
    swarm:
      worker_token: |
        -----BEGIN PGP MESSAGE-----

        hQGMA5BSrc6gwmwwAQv+MAF2/+EHaFS4VvaLdvUMNcYsYj22tPXAi93txSLUZpuF
        SLN74lc+1Lcsj45VMMX7jLCAsm2EuT4H954soehf4wrUmccETCU2uLWNkr5OcbH4
        lHRmHVTjRtqYx96TpzUIxLkufFrc02mKM5znGFHCb8zwW/KEtu9DDDmyVHas5IFJ
        yehIfNakFUifMkUY0H2c2f19hrCu7VfZRUTB+C/h6HntKZfVEIjGarQlAjsYchkl
        DkMK8kuOFL+ZC6ZiugP6IR0lQPnmhiRhvYbleyiQDxBt+WhFXFGE4iuF4SCbpbXC
        cM0CtjPzXMsLLuD7F4veDrL+TpEDase/VCuiCWOaSQoe/AOnD1Gm15S9TwPibVef
        pm3dO7mQOUZQI8eES4TBX92X64beslRuSZTZSGJSwzQnaODQXzUWW1eaBb54EpQH
        ewEDLt9DxP28MJQPQWGBc+x9zmDpDe/OncidQRzYsejVlKcCmpIY8yX1OvbPQph+
        ATnOyaMQmZnVwwwfAVTl0lIBougTItN0b0RSRAh6tREmoySBpv6msaKpQotUGhhR
        4AtY4U+GcJCiMQJBFo6GRGBd2T6hH+vJ+Lp4HwWJyuSmAyUXV2VNBqfNcrFZsNAp
        zY++
        =O01a
        -----END PGP MESSAGE-----
