/* SPDX-License-Identifier: MIT */
/*
 * sdnotify.h - the daemons' side of systemd's service protocols, without
 * libsystemd: readiness and watchdog notifications (sd_notify(3)) and socket
 * activation (sd_listen_fds(3)).  Outside systemd (no NOTIFY_SOCKET, no
 * LISTEN_FDS) every call does nothing.
 */
#ifndef GC_TOOLS_SDNOTIFY_H
#define GC_TOOLS_SDNOTIFY_H

#include <stdint.h>

/* Send state (e.g. "READY=1") to $NOTIFY_SOCKET: 1 sent, 0 no socket set,
 * -errno on failure (the daemon carries on: systemd then sees a timeout). */
int sd_notify_state(const char *state);
/* RELOADING=1 with MONOTONIC_USEC, as sd_notify(3) asks of a reload. */
int sd_notify_reloading(void);
/* $WATCHDOG_USEC when the watchdog is asked of this process ($WATCHDOG_PID
 * unset or ours), else 0: send WATCHDOG=1 at least every half of it. */
uint64_t sd_watchdog_usec(void);
/* The sockets systemd passed (fds 3 .. 3+n-1) when $LISTEN_PID is ours: n,
 * made close-on-exec, and LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES are
 * removed from the environment; 0 when none were passed; -1 with errno
 * when the variables are malformed. */
int sd_listen_fds_take(void);

#endif
