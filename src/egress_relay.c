/* egress_relay.c — the bytes of a connection once its upstream is
 * connected: the client → upstream direction through a bounded buffer, where
 * a forwarded request's body is framed (one request per connection), and
 * upstream → client spliced through a pipe; then the lingering close that
 * lets a client read its last answer. Called by egress_engine.c. */
#include "egress_engine.h"
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DOWN_PIPE (1 << 18)

/* How many of the n bytes just read from the client belong to the request
 * body; the connection reads no more once it has ended. -1: malformed. */
static long frame(struct conn *c, const char *p, size_t n)
{
    int done = 0;
    long keep;
    if (c->req.connect)
        return (long)n;
    if (c->req.body == BODY_CHUNKED) {
        keep = hcp_chunked_feed(&c->ck, p, n, &done);
        if (keep < 0)
            return -1;
    } else {
        keep = (long)(n < c->body_left ? n : c->body_left);
        c->body_left -= (uint64_t)keep;
        done = c->body_left == 0;
    }
    if (done) {
        c->body_done = 1;
        c->up.eof = 1;
    }
    return keep;
}

void hcp_relay_start(struct hcp_egress *e, struct conn *c)
{
    struct hcp_http_req *r = &c->req;
    c->up.cap = UP_BUF;
    c->up.buf = malloc(UP_BUF);
    if (!c->up.buf) {
        hcp_eng_fail(e, c, 502, "out of memory", hcp_now_ns());
        return;
    }
    if (r->connect) {
        c->mlen = (size_t)snprintf(c->msg, sizeof c->msg, "HTTP/1.1 200 Connection established\r\n\r\n");
        c->moff = 0;
    } else {
        long n = hcp_http_rewrite(c->head, r, c->up.buf, c->up.cap);
        if (n < 0) {
            hcp_eng_fail(e, c, 400, "a request head too large to forward", hcp_now_ns());
            return;
        }
        c->up.len = (size_t)n;
        c->body_left = r->body == BODY_LENGTH ? r->length : 0;
        if (r->body == BODY_NONE) {
            c->body_done = 1;
            c->up.eof = 1;
        }
    }
    /* what the client sent after the head: tunnel data, or the body */
    size_t extra = c->hlen - r->head_len;
    long keep = extra && !c->up.eof ? frame(c, c->head + r->head_len, extra) : 0;
    if (keep < 0) {
        hcp_eng_fail(e, c, 400, "a malformed chunked body", hcp_now_ns());
        return;
    }
    if ((size_t)keep > c->up.cap - c->up.len)
        keep = (long)(c->up.cap - c->up.len);   /* cannot happen: head + 16 KiB < 64 KiB */
    memcpy(c->up.buf + c->up.len, c->head + r->head_len, (size_t)keep);
    c->up.len += (size_t)keep;
    free(c->head);
    c->head = NULL;
    if (pipe2(c->down.pipe, O_NONBLOCK | O_CLOEXEC) == 0) {
        (void)fcntl(c->down.pipe[1], F_SETPIPE_SZ, DOWN_PIPE);   /* the default size works too */
        int sz = fcntl(c->down.pipe[1], F_GETPIPE_SZ);
        c->down.pipecap = sz > 0 ? (size_t)sz : 65536;
    } else {
        c->down.pipe[0] = c->down.pipe[1] = -1;
        c->down.cap = 65536;
        if (!(c->down.buf = malloc(c->down.cap))) {
            hcp_eng_fail(e, c, 502, "out of memory", hcp_now_ns());
            return;
        }
    }
    c->state = C_RELAY;
    c->deadline = NEVER;
}

/* Writes from the buffer to fd; 1 progress, 0 none, -1 error. */
static int buf_flush(struct dir *d, int fd, uint64_t *count)
{
    if (d->off == d->len)
        return 0;
    ssize_t n = send(fd, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0)
        return hcp_eng_again() ? 0 : -1;
    d->off += (size_t)n;
    if (count)
        *count += (uint64_t)n;
    if (d->off == d->len)
        d->off = d->len = 0;
    return n > 0;
}

/* Upstream → pipe (or buffer): 1 progress, 0 none, -1 error; eof on EOF. */
static int down_fill(struct dir *d, int fd, uint64_t *count)
{
    ssize_t n;
    if (d->eof)
        return 0;
    if (d->pipe[1] >= 0) {
        if (d->inpipe >= d->pipecap)
            return 0;
        n = splice(fd, NULL, d->pipe[1], NULL, d->pipecap - d->inpipe, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    } else {
        if (d->off > 0) {
            memmove(d->buf, d->buf + d->off, d->len - d->off);
            d->len -= d->off;
            d->off = 0;
        }
        if (d->len == d->cap)
            return 0;
        n = recv(fd, d->buf + d->len, d->cap - d->len, MSG_DONTWAIT);
    }
    if (n < 0)
        return hcp_eng_again() ? 0 : -1;
    if (n == 0) {
        d->eof = 1;
        return 1;
    }
    if (d->pipe[1] >= 0)
        d->inpipe += (size_t)n;
    else
        d->len += (size_t)n;
    *count += (uint64_t)n;
    return 1;
}

static int down_flush(struct dir *d, int fd)
{
    if (d->pipe[0] < 0)
        return buf_flush(d, fd, NULL);
    if (d->inpipe == 0)
        return 0;
    ssize_t n = splice(d->pipe[0], NULL, fd, NULL, d->inpipe, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (n < 0)
        return hcp_eng_again() ? 0 : -1;
    d->inpipe -= (size_t)n;
    return n > 0;
}

/* Client → buffer, framed: 1 progress, 0 none, -1 error, -2 malformed body. */
static int up_fill(struct conn *c)
{
    struct dir *d = &c->up;
    if (d->off > 0) {   /* what was sent makes room */
        memmove(d->buf, d->buf + d->off, d->len - d->off);
        d->len -= d->off;
        d->off = 0;
    }
    if (d->eof || d->len == d->cap)
        return 0;
    ssize_t n = recv(c->cfd, d->buf + d->len, d->cap - d->len, MSG_DONTWAIT);
    if (n < 0)
        return hcp_eng_again() ? 0 : -1;
    if (n == 0) {
        d->eof = 1;
        return 1;
    }
    long keep = frame(c, d->buf + d->len, (size_t)n);
    if (keep < 0)
        return -2;
    d->len += (size_t)keep;   /* bytes after the request's end are dropped */
    return 1;
}

int hcp_relay_down_empty(const struct dir *d)
{
    return d->pipe[0] >= 0 ? d->inpipe == 0 : d->off == d->len;
}

/* Moves what can be moved, both ways, until nothing moves. */
void hcp_relay_step(struct hcp_egress *e, struct conn *c, int64_t now)
{
    struct log_ent *l = hcp_eng_log_of(e, c);
    uint64_t sink_in = 0, sink_out = 0, *in = l ? &l->bytes_in : &sink_in, *out = l ? &l->bytes_out : &sink_out;
    for (int progress = 1, rounds = 0; progress && rounds < 16; rounds++) {
        int r[5] = { 0, 0, 0, 0, 0 };
        if (c->moff < c->mlen) {
            ssize_t n = send(c->cfd, c->msg + c->moff, c->mlen - c->moff, MSG_NOSIGNAL | MSG_DONTWAIT);
            r[0] = n < 0 ? (hcp_eng_again() ? 0 : -1) : n > 0;
            if (n > 0)
                c->moff += (size_t)n;
        }
        r[1] = up_fill(c);
        if (r[1] == -2) {
            hcp_eng_fail(e, c, 400, "a malformed chunked body", now);
            return;
        }
        if (c->ufd >= 0)
            r[2] = buf_flush(&c->up, c->ufd, out);
        if (c->ufd >= 0)
            r[3] = down_fill(&c->down, c->ufd, in);
        if (c->moff == c->mlen && !c->down.shut)
            r[4] = down_flush(&c->down, c->cfd);
        progress = 0;
        for (int i = 0; i < 5; i++) {
            if (r[i] < 0) {
                hcp_eng_closing(c, now);   /* a side reset or went away: nothing more to relay */
                c->mlen = c->moff = 0;
                c->deadline = now;
                return;
            }
            progress |= r[i];
        }
    }
    /* the client sent all it will: a tunnel half-closes upstream */
    if (c->req.connect && c->up.eof && c->up.len == 0 && !c->up.shut && c->ufd >= 0) {
        (void)shutdown(c->ufd, SHUT_WR);
        c->up.shut = 1;
    }
    if (c->down.eof && hcp_relay_down_empty(&c->down)) {
        if (!c->req.connect || c->up.shut || c->up.eof) {
            hcp_eng_closing(c, now);   /* the response is delivered (or the tunnel is done) */
            return;
        }
        if (!c->down.shut) {
            (void)shutdown(c->cfd, SHUT_WR);
            c->down.shut = 1;
        }
    }
}

/* Reads and drops what the client still sends, after the last byte it gets,
 * until it closes or the linger ends. */
void hcp_relay_closing(struct hcp_egress *e, struct conn *c, int64_t now)
{
    char sink[4096];
    while (c->moff < c->mlen && now < c->deadline) {
        ssize_t n = send(c->cfd, c->msg + c->moff, c->mlen - c->moff, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && hcp_eng_again())
            return;
        if (n <= 0)
            break;
        c->moff += (size_t)n;
    }
    if (c->moff < c->mlen || now >= c->deadline) {
        hcp_eng_conn_close(e, c);
        return;
    }
    if (!c->down.shut) {
        (void)shutdown(c->cfd, SHUT_WR);
        c->down.shut = 1;
    }
    for (int i = 0; i < 16; i++) {
        ssize_t n = recv(c->cfd, sink, sizeof sink, MSG_DONTWAIT);
        if (n < 0 && hcp_eng_again())
            return;
        if (n <= 0)
            break;   /* EOF, or an error: done */
    }
    hcp_eng_conn_close(e, c);
}

