/* nopipe.h — writing where a reader may have gone away without letting
 * SIGPIPE kill the runtime or changing any process-wide disposition: the
 * signal is blocked around the writes, and one they raised is consumed
 * (one that was already pending before is left for its owner). EPIPE then
 * comes back as an error like any other. nopipe.c */
#ifndef HCP_NOPIPE_H
#define HCP_NOPIPE_H

#include <signal.h>
#include <sys/types.h>

struct hcp_nopipe { sigset_t old; int was_pending; };

void hcp_nopipe_begin(struct hcp_nopipe *g);
void hcp_nopipe_end(const struct hcp_nopipe *g);
/* One write (retried on EINTR) between begin and end. Returns what write
 * returned; *err holds its errno. */
ssize_t hcp_write_nopipe(int fd, const void *buf, size_t len, int *err);

#endif
