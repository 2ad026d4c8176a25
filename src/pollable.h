/* pollable.h — what core.drive can wait on besides procs: anything that
 * has descriptors to poll and timers of its own (the egress proxy of a
 * call, src/egress.c). The drive loop polls them with the procs' pipes:
 *
 *   fill(self, out, max)   writes at most max pollfds for this pass and
 *                          returns how many (0 is fine: timers only);
 *   ready(self, pfd, n)    is called after every pass with those pollfds
 *                          (revents set, possibly all 0): the extra does its
 *                          I/O and its timers here;
 *   next(self, now)        the absolute time (CLOCK_MONOTONIC ns) it next
 *                          needs a pass, INT64_MAX for none — or a time <=
 *                          now when it needs its caller: core.drive then
 *                          returns after this pass (the proxy has a request
 *                          the runtime must decide).
 */
#ifndef HCP_POLLABLE_H
#define HCP_POLLABLE_H

#include <poll.h>
#include <stdint.h>

#define HCP_POLLABLE_MAX_FDS 4   /* what one extra may fill per pass */

struct hcp_pollable {
    int (*fill)(void *self, struct pollfd *out, int max);
    void (*ready)(void *self, const struct pollfd *pfd, int n);
    int64_t (*next)(void *self, int64_t now);
    void *self;
};

#endif
