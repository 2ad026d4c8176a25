/* pollable.h — what core.drive can service besides procs, in the same
 * poll: anything with descriptors to poll and timers of its own (a call's
 * egress proxy, src/egress.c; core.test_pollable, src/pollable.c). */
#ifndef HCP_POLLABLE_H
#define HCP_POLLABLE_H

#include <lua.h>
#include <poll.h>
#include <stdint.h>

/* Something else one drive services in the same poll as the procs (issue
 * 14's proxy sockets, say): `fill` puts up to `max` pollfds it waits on
 * into pfd and returns how many; `ready` gets them back, with revents,
 * after each poll (n = what fill returned; also called when only its timer
 * is due) and returns nonzero when the drive should return to its caller
 * after this pass; `next` returns the CLOCK_MONOTONIC nanoseconds of its
 * next timer, or NEVER. Runs in the caller's thread, between polls: no
 * callback may call back into Lua or free itself. */
struct hcp_pollable_ops {
    int (*fill)(void *self, struct pollfd *pfd, int max);
    int (*ready)(void *self, const struct pollfd *pfd, int n);
    int64_t (*next)(void *self, int64_t now);
};
struct hcp_pollable { const struct hcp_pollable_ops *ops; void *self; };
#define HCP_POLLABLE_FDS 16     /* at most per pollable */
#define HCP_POLLABLE_MAX 1024   /* pollables per drive: one per call in flight */
/* A Lua value is a pollable when it is a full userdata whose metatable has
 * `__hcp_pollable`, a light userdata pointing to its ops; self is the
 * userdata's block. The pollable at idx, or { NULL, NULL }. (pollable.c) */
struct hcp_pollable hcp_pollable_at(lua_State *L, int idx);

#endif
