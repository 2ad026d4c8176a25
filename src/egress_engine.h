/* egress_engine.h — private to egress_engine.c (the event-driven proxy) and
 * egress.c (its Lua methods). */
#ifndef HCP_EGRESS_ENGINE_H
#define HCP_EGRESS_ENGINE_H

#include "egress.h"

#include <errno.h>
#include <sys/socket.h>

#define CONN_MAX 32          /* open connections per call; more wait in the backlog */
#define UP_BUF 65536         /* client → upstream, per connection (a userspace buffer) */
#define LOG_MAX 1024         /* attempts kept per call; later ones are counted */
#define ADDR_MAX 8

enum { C_HEAD = 1, C_PENDING, C_RESOLVING, C_CONNECTING, C_RELAY, C_CLOSING };

/* One direction of a relay: through a pipe (splice) when it has one, else
 * through buf. */
struct dir {
    int pipe[2];
    size_t inpipe, pipecap;
    char *buf;
    size_t len, off, cap;
    int eof;     /* nothing more will be read from the source */
    int shut;    /* nothing more will be written to the destination */
};

struct conn {
    int state, id, slot, cfd, ufd, log;
    int64_t deadline;
    struct hcp_http_req req;
    char *head;
    size_t hlen;
    char msg[700];               /* a status line and reason for the client */
    size_t mlen, moff;
    struct dir up, down;         /* client → upstream, upstream → client */
    int body_done;
    uint64_t body_left;
    struct hcp_chunked ck;
    int resolved, naddr, next_addr;
    struct sockaddr_storage addr[ADDR_MAX];
    struct hcp_lookup *lk;
    uint32_t cev, uev;           /* the events registered for cfd, ufd */
};

struct log_ent {
    char host[HCP_HTTP_HOST_MAX + 8];   /* host:port */
    char method[24];
    char path[256];
    char reason[300];
    char error[300];
    int allowed;
    uint64_t bytes_in, bytes_out;
};

struct hcp_egress {
    int epfd, nl, lfd[2];
    int accepting;               /* the listeners are in the set for reading */
    int64_t accept_retry;        /* after EMFILE: when to try again */
    struct conn *conns[CONN_MAX];
    int nconn, next_id;
    int64_t connect_ns;
    struct log_ent *log;
    int nlog, caplog, dropped;
};

/* A non-blocking call that found nothing to do (or was interrupted). */
static inline int hcp_eng_again(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/* egress_engine.c: the connections' lifecycle, and what the relay uses */
struct log_ent *hcp_eng_log_of(struct hcp_egress *e, const struct conn *c);
void hcp_eng_fail(struct hcp_egress *e, struct conn *c, int status, const char *reason, int64_t now);
void hcp_eng_closing(struct conn *c, int64_t now);
void hcp_eng_conn_close(struct hcp_egress *e, struct conn *c);
void hcp_eng_init(struct hcp_egress *e);
void hcp_eng_close(struct hcp_egress *e);
void hcp_eng_ready(void *self, const struct pollfd *pfd, int n);
int64_t hcp_eng_next(void *self, int64_t now);
int hcp_eng_fill(void *self, struct pollfd *out, int max);
struct conn *hcp_eng_find(struct hcp_egress *e, int id);
/* The decisions, from the runtime: refuse (403 with the reason), connect
 * to these addresses in order, or look the name up first. */
void hcp_eng_refuse(struct hcp_egress *e, struct conn *c, const char *reason);
void hcp_eng_connect(struct hcp_egress *e, struct conn *c, const struct sockaddr_storage *a, int n);
void hcp_eng_resolve(struct hcp_egress *e, struct conn *c);
/* Runs the steps an answer started (a 403 to send, a connect to make) at
 * once rather than at the next poll. */
void hcp_eng_kick(struct hcp_egress *e, struct conn *c);
/* Takes the listeners into the set. */
int hcp_eng_adopt(struct hcp_egress *e, const int *fds, int n);

/* egress_relay.c */
void hcp_relay_start(struct hcp_egress *e, struct conn *c);
void hcp_relay_step(struct hcp_egress *e, struct conn *c, int64_t now);
void hcp_relay_closing(struct hcp_egress *e, struct conn *c, int64_t now);
int hcp_relay_down_empty(const struct dir *d);

#endif
