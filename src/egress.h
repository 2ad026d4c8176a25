/* egress.h — the egress proxy of a call (core.egress): an HTTP proxy that
 * listens inside the child's network namespace and connects out from the
 * runtime's, asking the runtime (Lua, hcp.egress) for every decision.
 *
 *   egress.c        the Lua methods (core.egress)
 *   egress_engine.c the engine: listeners, connections and their states,
 *                   timers, the log (egress_engine.h, private)
 *   egress_relay.c  the bytes of a connected connection, and its close
 *   egress_http.c   the request head and chunked-body parsers (pure)
 *   egress_dns.c    asynchronous name lookups (getaddrinfo_a), polled
 *   egress_child.c  the fork child's part: loopback up, the listeners made
 *                   and passed back to the runtime (SCM_RIGHTS)
 */
#ifndef HCP_EGRESS_H
#define HCP_EGRESS_H

#include "hcp_core.h"
#include "pollable.h"

#include <netdb.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EGRESS_MT "hcp.egress"

/* The port the proxy listens on in the child's namespace, on 127.0.0.1 and
 * [::1]: the namespace is fresh and empty, so a fixed port is always free,
 * and the child's environment (HTTP_PROXY…) is built before the fork. */
#define HCP_EGRESS_PORT 3128

struct hcp_egress;

/* ---- the engine (egress.c) ---------------------------------------------- */

/* The engine at idx, or NULL when it is not one (or closed). */
struct hcp_egress *hcp_egress_test(lua_State *L, int idx);
/* Takes the listening descriptors the child passed back (the engine owns
 * them from now on, also when it fails). 0, or -1 with errno. */
int hcp_egress_adopt(struct hcp_egress *e, const int *fds, int n);
/* Its epoll descriptor, for the runtime's poller. */
int hcp_egress_fd(const struct hcp_egress *e);
void hcp_register_egress(lua_State *L);

/* ---- the spawn's part (egress_child.c) ----------------------------------- */

/* In the fork child, just after unshare(CLONE_NEWNET): brings lo up,
 * listens on 127.0.0.1 and [::1] (when the kernel has IPv6) at
 * HCP_EGRESS_PORT, sends the listeners over `sock` and closes its copies.
 * Syscalls only. 0, or -1 with errno. */
int hcp_egress_listen(int sock);
/* In the parent, after the exec: the listeners the child sent (up to max).
 * The count, or -1 with errno (EPROTO: nothing was sent). */
int hcp_egress_receive(int sock, int *fds, int max);

/* ---- the request head (egress_http.c) ------------------------------------ */

#define HCP_HTTP_HEAD_MAX 16384
#define HCP_HTTP_PATH_MAX 8192
#define HCP_HTTP_HOST_MAX 256

enum { BODY_NONE, BODY_LENGTH, BODY_CHUNKED };

struct hcp_http_req {
    int connect;                      /* CONNECT host:port */
    char method[24];
    char host[HCP_HTTP_HOST_MAX];     /* lower case; an IPv6 literal in [] */
    int port;
    char path[HCP_HTTP_PATH_MAX];     /* origin form (path and query); "" for CONNECT */
    size_t head_len;                  /* bytes of the head, the blank line included */
    int body;                         /* BODY_* */
    uint64_t length;                  /* BODY_LENGTH */
};

/* Parses a request head from buf. Returns 1 with *req filled, 0 when more
 * bytes are needed, or an HTTP status (400, 405, 501, 505) with *why set. */
int hcp_http_parse(const char *buf, size_t len, struct hcp_http_req *req, const char **why);

/* Writes the head the upstream gets for a forwarded request: origin-form
 * request line, Host from the URI, the client's headers less the hop-by-hop
 * and Proxy-* ones, and `Connection: close`. The length, or -1 when out is
 * too small. */
long hcp_http_rewrite(const char *buf, const struct hcp_http_req *req, char *out, size_t size);

/* A chunked body passing through: feed bytes, learn how many belong to the
 * message and when it has ended. */
struct hcp_chunked { int st; uint64_t left; unsigned line; };
/* Returns how many of the n bytes belong to the message (all of them until
 * it ends), with *done set at its end; -1 for a malformed body. */
long hcp_chunked_feed(struct hcp_chunked *c, const char *p, size_t n, int *done);

/* ---- name lookups (egress_dns.c) ----------------------------------------- */

struct hcp_lookup;
/* Starts looking `host` up (numeric port `port`) without blocking. NULL
 * with *err (an EAI_* code) when it cannot start. */
struct hcp_lookup *hcp_lookup_start(const char *host, int port, int *err);
/* 0 when done (the answer in *res, owned by the lookup), EAI_INPROGRESS,
 * or the EAI_* error. */
int hcp_lookup_poll(struct hcp_lookup *lk, const struct addrinfo **res);
/* Cancels and frees (a lookup the resolver still runs is freed later). */
void hcp_lookup_drop(struct hcp_lookup *lk);

#endif
