/* egress_engine.c — the proxy of one call, event-driven: one epoll set for
 * its listeners (inside the child's network namespace) and connections,
 * polled by core.drive with the call's pipes (pollable.h). No thread, no
 * blocking call: a connection moves through
 *
 *   HEAD        reading the request head (16 KiB at most, 30 s)
 *   PENDING     parked: the runtime decides (hcp.egress, in Lua)
 *   RESOLVING   the runtime's own lookup of the name (egress_dns.c)
 *   CONNECTING  a non-blocking connect to each allowed address in turn
 *   RELAY       bytes both ways: client → upstream through a 64 KiB buffer
 *               (a forwarded request's body is framed there, so one
 *               request goes upstream), upstream → client spliced through
 *               a pipe
 *   CLOSING     a status for the client (403 and why; 502; 504), then a
 *               lingering close so the client reads it before any reset
 *
 * Every attempt is on the call's log, with its bytes each way. */
#include "egress_engine.h"
#include "nopipe.h"
#include "spawn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define HEAD_NS (30000 * MS)
#define LINGER_NS (2000 * MS)
#define LOOKUP_NS (20000 * MS)
#define LOOKUP_TICK_NS (2 * MS)
#define ACCEPT_RETRY_NS (100 * MS)

enum { K_LISTEN, K_CLIENT, K_UP };

/* ---- the log --------------------------------------------------------------- */

static void copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

/* A new entry for c's request (host:port, method, path without its query,
 * which may carry a secret); -1 when the log is full (counted). */
static int log_new(struct hcp_egress *e, const struct hcp_http_req *r)
{
    if (e->nlog == LOG_MAX) {
        e->dropped++;
        return -1;
    }
    if (e->nlog == e->caplog) {
        int cap = e->caplog ? e->caplog * 2 : 16;
        struct log_ent *l = realloc(e->log, sizeof *l * (size_t)cap);
        if (!l) {
            e->dropped++;
            return -1;
        }
        e->log = l;
        e->caplog = cap;
    }
    struct log_ent *l = &e->log[e->nlog];
    memset(l, 0, sizeof *l);
    if (r) {
        snprintf(l->host, sizeof l->host, "%s:%d", r->host, r->port);
        copy(l->method, sizeof l->method, r->method);
        size_t q = strcspn(r->path, "?");
        if (q > 200)
            q = 200;
        snprintf(l->path, sizeof l->path, "%.*s%s", (int)q, r->path,
                 r->path[q] == '?' ? "?..." : r->path[q] ? "..." : "");
    }
    return e->nlog++;
}

struct log_ent *hcp_eng_log_of(struct hcp_egress *e, const struct conn *c)
{
    return c->log >= 0 ? &e->log[c->log] : NULL;
}

/* ---- epoll ----------------------------------------------------------------- */

static uint64_t tag(const struct conn *c, int kind)
{
    return ((uint64_t)(uint32_t)c->id << 32) | ((uint64_t)c->slot << 2) | (uint64_t)kind;
}

/* Registers what fd waits for; no interest takes it out of the set, so a
 * side that reset or hung up cannot make the loop spin while the other side
 * is what the connection waits on. */
static void watch(struct hcp_egress *e, struct conn *c, int fd, uint32_t *have, uint32_t want, int kind)
{
    struct epoll_event ev;
    if (fd < 0 || *have == want)
        return;
    memset(&ev, 0, sizeof ev);
    ev.events = want;
    ev.data.u64 = tag(c, kind);
    if (want == 0) {
        (void)epoll_ctl(e->epfd, EPOLL_CTL_DEL, fd, NULL);   /* ENOENT: not in it */
        *have = 0;
        return;
    }
    /* an fd that cannot be added has no events: the connection's deadline
     * (or its other side) ends it */
    if (epoll_ctl(e->epfd, EPOLL_CTL_MOD, fd, &ev) == 0 ||
        (errno == ENOENT && epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) == 0))
        *have = want;
}

static void set_accepting(struct hcp_egress *e, int on)
{
    if (e->accepting == on)
        return;
    for (int i = 0; i < e->nl; i++) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = on ? EPOLLIN : 0;
        ev.data.u64 = (uint64_t)i << 2 | K_LISTEN;
        (void)epoll_ctl(e->epfd, EPOLL_CTL_MOD, e->lfd[i], &ev);
    }
    e->accepting = on;
}

/* ---- connections ------------------------------------------------------------ */

static void dir_free(struct dir *d)
{
    hcp_closefd(&d->pipe[0]);
    hcp_closefd(&d->pipe[1]);
    free(d->buf);
    d->buf = NULL;
}

void hcp_eng_conn_close(struct hcp_egress *e, struct conn *c)
{
    hcp_closefd(&c->cfd);
    hcp_closefd(&c->ufd);
    dir_free(&c->up);
    dir_free(&c->down);
    free(c->head);
    hcp_lookup_drop(c->lk);
    e->conns[c->slot] = NULL;
    e->nconn--;
    free(c);
    if (e->nconn < CONN_MAX && e->accept_retry == 0)
        set_accepting(e, 1);
}

static void accept_all(struct hcp_egress *e, int which, int64_t now)
{
    while (e->nconn < CONN_MAX) {
        int fd = accept4(e->lfd[which], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
                set_accepting(e, 0);   /* out of descriptors: try again later, never spin */
                e->accept_retry = now + ACCEPT_RETRY_NS;
            }
            return;
        }
        struct conn *c = calloc(1, sizeof *c);
        char *head = malloc(HCP_HTTP_HEAD_MAX);
        int slot = 0;
        while (slot < CONN_MAX && e->conns[slot])
            slot++;
        if (!c || !head) {
            free(c);
            free(head);
            close(fd);
            return;
        }
        c->state = C_HEAD;
        c->id = ++e->next_id;
        c->slot = slot;
        c->cfd = fd;
        c->ufd = -1;
        c->log = -1;
        c->head = head;
        c->up.pipe[0] = c->up.pipe[1] = c->down.pipe[0] = c->down.pipe[1] = -1;
        c->deadline = now + HEAD_NS;
        e->conns[slot] = c;
        e->nconn++;
        watch(e, c, c->cfd, &c->cev, EPOLLIN, K_CLIENT);
    }
    set_accepting(e, 0);
}

/* The status and one-line reason the client gets before the connection
 * closes (a refusal, a failure upstream); control bytes become spaces. */
static void say(struct conn *c, int status, const char *reason)
{
    static const struct { int code; const char *text; } st[] = {
        { 400, "Bad Request" }, { 403, "Forbidden" }, { 501, "Not Implemented" },
        { 502, "Bad Gateway" }, { 504, "Gateway Timeout" }, { 505, "HTTP Version Not Supported" },
    };
    const char *text = "Error";
    char body[400];
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
        if (st[i].code == status)
            text = st[i].text;
    int n = snprintf(body, sizeof body - 1, "egress: %s", reason);
    if (n < 0 || (size_t)n >= sizeof body - 1)
        n = (int)sizeof body - 2;
    for (int i = 0; i < n; i++)
        if ((unsigned char)body[i] < 0x20 || body[i] == 0x7f)
            body[i] = ' ';
    body[n++] = '\n';
    c->mlen = (size_t)snprintf(c->msg, sizeof c->msg,
                               "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                               "Content-Length: %d\r\nConnection: close\r\n\r\n%.*s",
                               status, text, n, n, body);
    if (c->mlen >= sizeof c->msg)
        c->mlen = sizeof c->msg - 1;
    c->moff = 0;
}

/* Ends the exchange: the message (if any) is sent, the write side shut,
 * and what the client still sends is read and dropped for a moment. */
void hcp_eng_closing(struct conn *c, int64_t now)
{
    hcp_closefd(&c->ufd);
    c->uev = 0;
    c->state = C_CLOSING;
    c->deadline = now + LINGER_NS;
}

void hcp_eng_fail(struct hcp_egress *e, struct conn *c, int status, const char *reason, int64_t now)
{
    struct log_ent *l = hcp_eng_log_of(e, c);
    if (l && l->allowed)
        copy(l->error, sizeof l->error, reason);
    say(c, status, reason);
    hcp_eng_closing(c, now);
}

void hcp_eng_refuse(struct hcp_egress *e, struct conn *c, const char *reason)
{
    struct log_ent *l = hcp_eng_log_of(e, c);
    if (l) {
        l->allowed = 0;
        copy(l->reason, sizeof l->reason, reason);
    }
    say(c, 403, reason);
    hcp_eng_closing(c, hcp_now_ns());
}

/* ---- connecting ------------------------------------------------------------- */

static void connect_next(struct hcp_egress *e, struct conn *c, int64_t now, int last_err)
{
    hcp_closefd(&c->ufd);
    c->uev = 0;
    while (c->next_addr < c->naddr) {
        const struct sockaddr_storage *a = &c->addr[c->next_addr++];
        socklen_t len = a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        int fd = socket(a->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last_err = errno;
            continue;
        }
        if (connect(fd, (const struct sockaddr *)a, len) == 0 || errno == EINPROGRESS) {
            c->ufd = fd;
            c->state = C_CONNECTING;
            c->deadline = now + e->connect_ns;
            watch(e, c, c->ufd, &c->uev, EPOLLOUT, K_UP);
            return;
        }
        last_err = errno;
        close(fd);
    }
    char why[400];
    snprintf(why, sizeof why, "cannot connect to %s:%d: %s", c->req.host, c->req.port,
             last_err == ETIMEDOUT ? "timed out" : strerror(last_err));
    hcp_eng_fail(e, c, last_err == ETIMEDOUT ? 504 : 502, why, now);
}

void hcp_eng_connect(struct hcp_egress *e, struct conn *c, const struct sockaddr_storage *a, int n)
{
    struct log_ent *l = hcp_eng_log_of(e, c);
    if (l)
        l->allowed = 1;
    hcp_lookup_drop(c->lk);
    c->lk = NULL;
    c->naddr = n > ADDR_MAX ? ADDR_MAX : n;
    memcpy(c->addr, a, sizeof *a * (size_t)c->naddr);
    c->next_addr = 0;
    connect_next(e, c, hcp_now_ns(), EHOSTUNREACH);
}

void hcp_eng_resolve(struct hcp_egress *e, struct conn *c)
{
    int err = 0;
    struct log_ent *l = hcp_eng_log_of(e, c);
    if (l)
        l->allowed = 1;
    c->lk = hcp_lookup_start(c->req.host, c->req.port, &err);
    if (!c->lk) {
        char why[400];
        snprintf(why, sizeof why, "cannot look %s up: %s", c->req.host, gai_strerror(err));
        hcp_eng_fail(e, c, 502, why, hcp_now_ns());
        return;
    }
    c->state = C_RESOLVING;
    c->deadline = hcp_now_ns() + LOOKUP_NS;
}

/* A lookup's answer becomes the addresses the runtime checks (PENDING
 * again, with `resolved`). */
static void lookup_step(struct hcp_egress *e, struct conn *c, int64_t now)
{
    const struct addrinfo *res = NULL;
    int r = hcp_lookup_poll(c->lk, &res);
    if (r == EAI_INPROGRESS) {
        if (now >= c->deadline)
            hcp_eng_fail(e, c, 504, "the name lookup timed out", now);
        return;
    }
    c->naddr = 0;
    for (const struct addrinfo *ai = r == 0 ? res : NULL; ai && c->naddr < ADDR_MAX; ai = ai->ai_next)
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) && ai->ai_addrlen <= sizeof c->addr[0])
            memcpy(&c->addr[c->naddr++], ai->ai_addr, ai->ai_addrlen);
    hcp_lookup_drop(c->lk);
    c->lk = NULL;
    if (c->naddr == 0) {
        char why[400];
        snprintf(why, sizeof why, "cannot resolve %s: %s", c->req.host,
                 r ? gai_strerror(r) : "no IPv4 or IPv6 address");
        hcp_eng_fail(e, c, 502, why, now);
        return;
    }
    c->resolved = 1;
    c->state = C_PENDING;
}

static void connect_step(struct hcp_egress *e, struct conn *c, uint32_t uev, int64_t now)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (!(uev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        if (now >= c->deadline)
            connect_next(e, c, now, ETIMEDOUT);
        return;
    }
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err) {
        connect_next(e, c, now, err);
        return;
    }
    hcp_relay_start(e, c);
}

/* ---- reading the head ------------------------------------------------------------ */

static void head_step(struct hcp_egress *e, struct conn *c, int64_t now)
{
    while (c->hlen < HCP_HTTP_HEAD_MAX) {
        ssize_t n = recv(c->cfd, c->head + c->hlen, HCP_HTTP_HEAD_MAX - c->hlen, MSG_DONTWAIT);
        if (n < 0 && hcp_eng_again())
            break;
        if (n <= 0) {
            hcp_eng_conn_close(e, c);   /* the client left before it asked for anything */
            return;
        }
        c->hlen += (size_t)n;
    }
    const char *why = NULL;
    int r = hcp_http_parse(c->head, c->hlen, &c->req, &why);
    if (r == 0) {
        if (now >= c->deadline)
            hcp_eng_conn_close(e, c);
        return;
    }
    if (r != 1) {
        c->log = log_new(e, NULL);
        struct log_ent *l = hcp_eng_log_of(e, c);
        if (l) {
            copy(l->host, sizeof l->host, "(unreadable request)");
            snprintf(l->reason, sizeof l->reason, "bad request: %s", why);
        }
        say(c, r, why);
        hcp_eng_closing(c, now);
        return;
    }
    c->log = log_new(e, &c->req);
    struct log_ent *l = hcp_eng_log_of(e, c);
    if (l)
        copy(l->reason, sizeof l->reason, "the client left before the decision");
    c->state = C_PENDING;
    c->deadline = NEVER;
}

/* ---- the engine ------------------------------------------------------------------ */

static void interest(struct hcp_egress *e, struct conn *c)
{
    uint32_t cw = 0, uw = 0;
    switch (c->state) {
    case C_HEAD:
        cw = EPOLLIN;
        break;
    case C_CONNECTING:
        uw = EPOLLOUT;
        break;
    case C_RELAY:
        if (!c->up.eof && c->up.len - c->up.off < c->up.cap)
            cw |= EPOLLIN;
        if (!c->req.connect && c->body_done)
            cw |= EPOLLRDHUP;   /* the client leaving ends a forwarded request */
        if (c->moff < c->mlen || (!c->down.shut && !hcp_relay_down_empty(&c->down)))
            cw |= EPOLLOUT;
        if (!c->down.eof && (c->down.pipe[1] >= 0 ? c->down.inpipe < c->down.pipecap
                                                   : c->down.len - c->down.off < c->down.cap))
            uw |= EPOLLIN;
        if (c->up.off < c->up.len)
            uw |= EPOLLOUT;
        break;
    case C_CLOSING:
        cw = c->moff < c->mlen ? EPOLLOUT : EPOLLIN;
        break;
    default:
        break;
    }
    watch(e, c, c->cfd, &c->cev, cw, K_CLIENT);
    watch(e, c, c->ufd, &c->uev, uw, K_UP);
}

/* One connection, after an event on either side (cev, uev) or a timer.
 * Any step may close it: `slot` tells whether it is still there. */
static void step(struct hcp_egress *e, struct conn *c, uint32_t cev, uint32_t uev, int64_t now)
{
    int slot = c->slot;
    switch (c->state) {
    case C_HEAD:
        head_step(e, c, now);
        break;
    case C_RESOLVING:
        lookup_step(e, c, now);
        break;
    case C_CONNECTING:
        connect_step(e, c, uev, now);
        break;
    default:
        break;
    }
    if (e->conns[slot] != c)
        return;
    if (c->state == C_RELAY)
        hcp_relay_step(e, c, now);
    /* a forwarded request whose client closed: nobody reads the response */
    if (c->state == C_RELAY && !c->req.connect && c->body_done && (cev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        hcp_eng_closing(c, now);
        c->deadline = now;
    }
    if (c->state == C_CLOSING)
        hcp_relay_closing(e, c, now);
    if (e->conns[slot] == c)
        interest(e, c);
}

/* SIGPIPE stays blocked while the engine writes (splice to a socket raises
 * it; send has MSG_NOSIGNAL), and one it raised is consumed: a client
 * that went away can never kill the runtime (nopipe.h). */
struct conn *hcp_eng_find(struct hcp_egress *e, int id)
{
    for (int i = 0; i < CONN_MAX; i++)
        if (e->conns[i] && e->conns[i]->id == id)
            return e->conns[i];
    return NULL;
}

void hcp_eng_kick(struct hcp_egress *e, struct conn *c)
{
    struct hcp_nopipe g;
    hcp_nopipe_begin(&g);
    step(e, c, 0, 0, hcp_now_ns());
    hcp_nopipe_end(&g);
}

void hcp_eng_ready(void *self, const struct pollfd *pfd, int n)
{
    struct hcp_egress *e = self;
    struct epoll_event ev[64];
    struct hcp_nopipe g;
    int64_t now = hcp_now_ns();
    hcp_nopipe_begin(&g);
    int k = 0;
    if (n > 0 && pfd[0].revents)
        while ((k = epoll_wait(e->epfd, ev, 64, 0)) < 0 && errno == EINTR)
            ;
    for (int i = 0; i < k; i++) {
        int kind = (int)(ev[i].data.u64 & 3), slot = (int)((ev[i].data.u64 >> 2) & 0x3fffffff);
        if (kind == K_LISTEN) {
            accept_all(e, slot, now);
            continue;
        }
        struct conn *c = slot < CONN_MAX ? e->conns[slot] : NULL;
        if (!c || (uint32_t)c->id != (uint32_t)(ev[i].data.u64 >> 32))
            continue;   /* closed earlier in this batch */
        step(e, c, kind == K_CLIENT ? ev[i].events : 0, kind == K_UP ? ev[i].events : 0, now);
    }
    /* timers: deadlines, lookups, the accept retry */
    if (e->accept_retry && now >= e->accept_retry) {
        e->accept_retry = 0;
        if (e->nconn < CONN_MAX)
            set_accepting(e, 1);
    }
    for (int i = 0; i < CONN_MAX; i++) {
        struct conn *c = e->conns[i];
        if (c && (c->state == C_RESOLVING || now >= c->deadline))
            step(e, c, 0, 0, now);
    }
    hcp_nopipe_end(&g);
}

int64_t hcp_eng_next(void *self, int64_t now)
{
    struct hcp_egress *e = self;
    int64_t t = e->accept_retry ? e->accept_retry : NEVER;
    for (int i = 0; i < CONN_MAX; i++) {
        const struct conn *c = e->conns[i];
        if (!c)
            continue;
        if (c->state == C_PENDING)
            return now;   /* the runtime must decide: core.drive returns */
        if (c->state == C_RESOLVING && now + LOOKUP_TICK_NS < t)
            t = now + LOOKUP_TICK_NS;
        if (c->deadline < t)
            t = c->deadline;
    }
    return t;
}

int hcp_eng_fill(void *self, struct pollfd *out, int max)
{
    struct hcp_egress *e = self;
    if (max < 1 || e->epfd < 0)
        return 0;
    out[0].fd = e->epfd;
    out[0].events = POLLIN;
    out[0].revents = 0;
    return 1;
}

void hcp_eng_init(struct hcp_egress *e)
{
    memset(e, 0, sizeof *e);
    e->epfd = e->lfd[0] = e->lfd[1] = -1;
    e->connect_ns = 10000 * MS;
}

void hcp_eng_close(struct hcp_egress *e)
{
    for (int i = 0; i < CONN_MAX; i++)
        if (e->conns[i])
            hcp_eng_conn_close(e, e->conns[i]);
    for (int i = 0; i < e->nl; i++)
        hcp_closefd(&e->lfd[i]);
    e->nl = 0;
    hcp_closefd(&e->epfd);
    free(e->log);
    e->log = NULL;
    e->nlog = e->caplog = 0;
}

int hcp_eng_adopt(struct hcp_egress *e, const int *fds, int n)
{
    if (e->epfd < 0 || e->nl + n > 2) {
        for (int i = 0; i < n; i++)
            close(fds[i]);
        return errno = EINVAL, -1;
    }
    for (int i = 0; i < n; i++) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN;
        ev.data.u64 = (uint64_t)e->nl << 2 | K_LISTEN;
        e->lfd[e->nl++] = fds[i];   /* owned from here on, added or not */
        if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fds[i], &ev) < 0)
            return -1;
    }
    e->accepting = 1;
    return 0;
}
