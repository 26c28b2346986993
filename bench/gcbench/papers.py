"""The papers' numbers that the results put beside ours (bench/README.md says
where each comes from)."""

FRAME_MS = 1000.0 / 30          # 33.33 ms: one frame of a 30 frame/s game loop (seed 000)

TABLE1 = [  # seed 000, Table 1: N, send, other, send', total', factor, N' (ms; 100 B, FreeBSD)
    (40, 2.78, 30.55, 0.75, 31.30, 1.06, 42),
    (120, 8.26, 25.07, 1.90, 26.97, 1.24, 148),
    (240, 16.50, 16.83, 3.64, 20.47, 1.63, 390),
    (360, 24.76, 8.57, 5.36, 13.93, 2.39, 861),
    (480, 33.06, 0.27, 7.10, 7.37, 4.52, 2170),
]
RATIO_100 = (480, 33.06 / 7.10, "kernel-groupcast vs user-groupcast, FreeBSD 5.2.1, 100 B "
             "(seed 000, Table 1 / Figure 3: 33.06 ms / 7.10 ms)")
RATIO_1000 = (1000, 1.664, "sendgroup() vs sendmsg() loop, Linux, 1000 B "
              "(seed 003, Amdahl slide: s = 1.664)")
