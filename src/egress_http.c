/* egress_http.c — what the egress proxy reads of HTTP: the request head
 * (a CONNECT, or an absolute-URI request to forward) and the framing of a
 * request body, so exactly one request goes upstream per connection. Pure
 * functions over buffers, strict on purpose: what a lenient parser and a
 * server would read differently (bare LF, whitespace before a colon, folded
 * lines, two lengths, a length beside chunked) is refused, never guessed. */
#include "egress.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MAX_HEADERS 100

static int tchar(unsigned char c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Where the head ends (after the blank line), 0 if not yet, -1 when a byte
 * seen so far can never be part of a head. */
static long head_end(const char *b, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (b[i] == '\0' || (b[i] == '\n' && (i == 0 || b[i - 1] != '\r')))
            return -1;
        if (b[i] == '\n' && i >= 3 && b[i - 2] == '\n')
            return (long)i + 1;
    }
    return 0;
}

static int fail(const char **why, const char *msg, int status)
{
    *why = msg;
    return status;
}

/* host[:port] from s[0..n): lower-cased into req->host. */
static int authority(const char *s, size_t n, int need_port, struct hcp_http_req *req, const char **why)
{
    size_t h = 0, i = 0;
    if (n == 0)
        return fail(why, "no host", 400);
    if (memchr(s, '@', n))
        return fail(why, "user info in the URL", 400);
    if (s[0] == '[') {
        while (i < n && s[i] != ']')
            i++;
        if (i == n || i < 3)
            return fail(why, "a malformed IPv6 literal", 400);
        for (size_t k = 1; k < i; k++)
            if (!isxdigit((unsigned char)s[k]) && s[k] != ':' && s[k] != '.')
                return fail(why, "a malformed IPv6 literal", 400);
        i++;
    } else {
        while (i < n && s[i] != ':') {
            unsigned char c = (unsigned char)s[i];
            if (!isalnum(c) && c != '.' && c != '-' && c != '_')
                return fail(why, "a host name with characters no name has", 400);
            i++;
        }
        if (i == 0)
            return fail(why, "no host", 400);
    }
    if (i >= HCP_HTTP_HOST_MAX)
        return fail(why, "a host name longer than 255 bytes", 400);
    for (h = 0; h < i; h++)
        req->host[h] = (char)tolower((unsigned char)s[h]);
    req->host[h] = '\0';
    req->port = 0;
    if (i < n) {
        if (s[i] != ':' || i + 1 == n || n - i - 1 > 5)
            return fail(why, "a malformed port", 400);
        for (size_t k = i + 1; k < n; k++) {
            if (!isdigit((unsigned char)s[k]))
                return fail(why, "a malformed port", 400);
            req->port = req->port * 10 + (s[k] - '0');
        }
        if (req->port < 1 || req->port > 65535)
            return fail(why, "a port out of range", 400);
    } else if (need_port) {
        return fail(why, "CONNECT needs HOST:PORT", 400);
    } else {
        req->port = 80;
    }
    return 1;
}

/* The request target of a forwarded request: http://authority[/path][?q] */
static int absolute(const char *t, size_t n, struct hcp_http_req *req, const char **why)
{
    if (n >= 8 && strncasecmp(t, "https://", 8) == 0)
        return fail(why, "an https:// URL goes through CONNECT", 400);
    if (n < 7 || strncasecmp(t, "http://", 7) != 0)
        return fail(why, "not a proxy request (the target must be an absolute http:// URL)", 400);
    t += 7;
    n -= 7;
    size_t a = 0;
    while (a < n && t[a] != '/' && t[a] != '?')
        a++;
    int r = authority(t, a, 0, req, why);
    if (r != 1)
        return r;
    size_t plen = n - a, off = 0;
    if (plen == 0 || t[a] == '?')
        req->path[off++] = '/';
    if (plen + off >= HCP_HTTP_PATH_MAX)
        return fail(why, "a URL longer than 8 KiB", 400);
    for (size_t k = a; k < n; k++)
        if ((unsigned char)t[k] <= 0x20 || (unsigned char)t[k] >= 0x7f || t[k] == '#')
            return fail(why, "a URL with characters a URL cannot have", 400);
    memcpy(req->path + off, t + a, plen);
    req->path[off + plen] = '\0';
    return 1;
}

/* The request line: METHOD SP target SP HTTP/1.x CRLF */
static int request_line(const char *b, size_t len, struct hcp_http_req *req, const char **why)
{
    size_t m = 0;
    while (m < len && b[m] >= 'A' && b[m] <= 'Z')
        m++;
    if (m == 0 || m >= sizeof req->method || m >= len || b[m] != ' ')
        return fail(why, "a malformed request line", 400);
    memcpy(req->method, b, m);
    req->method[m] = '\0';
    const char *t = b + m + 1, *sp = memchr(t, ' ', len - m - 1);
    if (!sp || sp == t)
        return fail(why, "a malformed request line", 400);
    size_t vlen = (size_t)(b + len - (sp + 1));
    if (vlen != 8 || (strncmp(sp + 1, "HTTP/1.1", 8) != 0 && strncmp(sp + 1, "HTTP/1.0", 8) != 0))
        return fail(why, "not HTTP/1.0 or HTTP/1.1", 505);
    req->connect = strcmp(req->method, "CONNECT") == 0;
    req->path[0] = '\0';
    if (req->connect)
        return authority(t, (size_t)(sp - t), 1, req, why);
    return absolute(t, (size_t)(sp - t), req, why);
}

/* The value of a header line, OWS trimmed. */
static void header_value(const char *line, size_t len, size_t colon, const char **v, size_t *vlen)
{
    size_t s = colon + 1, e = len;
    while (s < e && (line[s] == ' ' || line[s] == '\t'))
        s++;
    while (e > s && (line[e - 1] == ' ' || line[e - 1] == '\t'))
        e--;
    *v = line + s;
    *vlen = e - s;
}

static int body_header(const char *name, size_t nlen, const char *v, size_t vlen,
                       struct hcp_http_req *req, int *have_len, const char **why)
{
    if (nlen == 14 && strncasecmp(name, "content-length", 14) == 0) {
        uint64_t n = 0;
        if (vlen == 0 || vlen > 15)
            return fail(why, "a malformed Content-Length", 400);
        for (size_t i = 0; i < vlen; i++) {
            if (!isdigit((unsigned char)v[i]))
                return fail(why, "a malformed Content-Length", 400);
            n = n * 10 + (uint64_t)(v[i] - '0');
        }
        if (*have_len && n != req->length)
            return fail(why, "two different Content-Length headers", 400);
        *have_len = 1;
        req->length = n;
    } else if (nlen == 17 && strncasecmp(name, "transfer-encoding", 17) == 0) {
        if (vlen != 7 || strncasecmp(v, "chunked", 7) != 0 || req->body == BODY_CHUNKED)
            return fail(why, "a Transfer-Encoding other than one \"chunked\"", 501);
        req->body = BODY_CHUNKED;
    }
    return 1;
}

/* The header line after *at (within the head's `head` bytes): its start and
 * length without the CRLF; 0 at the blank line that ends the head. */
static int next_header(const char *b, size_t head, size_t *at, const char **line, size_t *llen)
{
    const char *eol = memchr(b + *at, '\n', head - *at);
    if (!eol || eol - (b + *at) <= 1)
        return 0;
    *line = b + *at;
    *llen = (size_t)(eol - *line) - 1;
    *at = (size_t)(eol - b) + 1;
    return 1;
}

int hcp_http_parse(const char *buf, size_t len, struct hcp_http_req *req, const char **why)
{
    long end = head_end(buf, len);
    if (end < 0)
        return fail(why, "a malformed request head (a NUL byte or a bare LF)", 400);
    if (end == 0)
        return len >= HCP_HTTP_HEAD_MAX ? fail(why, "a request head larger than 16 KiB", 400) : 0;
    if ((size_t)end > HCP_HTTP_HEAD_MAX)
        return fail(why, "a request head larger than 16 KiB", 400);
    memset(req, 0, sizeof *req);
    req->head_len = (size_t)end;
    const char *eol = memchr(buf, '\n', (size_t)end);
    int r = request_line(buf, (size_t)(eol - 1 - buf), req, why);
    if (r != 1)
        return r;
    int have_len = 0, count = 0;
    size_t at = (size_t)(eol - buf) + 1, llen;
    const char *line;
    while (next_header(buf, (size_t)end, &at, &line, &llen)) {
        const char *colon = memchr(line, ':', llen), *v;
        size_t vlen;
        if (++count > MAX_HEADERS)
            return fail(why, "more than 100 header lines", 400);
        if (line[0] == ' ' || line[0] == '\t')
            return fail(why, "a folded header line", 400);
        if (!colon || colon == line)
            return fail(why, "a header line without a name", 400);
        for (const char *c = line; c < colon; c++)
            if (!tchar((unsigned char)*c))
                return fail(why, "a header name with characters no name has", 400);
        for (size_t k = 0; k < llen; k++)
            if (line[k] == '\r')
                return fail(why, "a CR inside a header line", 400);
        header_value(line, llen, (size_t)(colon - line), &v, &vlen);
        int br = req->connect ? 1 : body_header(line, (size_t)(colon - line), v, vlen, req, &have_len, why);
        if (br != 1)
            return br;
    }
    if (have_len && req->body == BODY_CHUNKED)
        return fail(why, "both Content-Length and Transfer-Encoding", 400);
    if (have_len && req->length > 0)
        req->body = BODY_LENGTH;
    return 1;
}

/* Headers that belong to the hop from the client to us. */
static int hop_by_hop(const char *name, size_t n)
{
    static const char *const drop[] = { "host", "connection", "keep-alive", "te", "upgrade", NULL };
    if (n >= 6 && strncasecmp(name, "proxy-", 6) == 0)
        return 1;
    for (int i = 0; drop[i]; i++)
        if (strlen(drop[i]) == n && strncasecmp(name, drop[i], n) == 0)
            return 1;
    return 0;
}

static int put(char *out, size_t size, size_t *at, const char *s, size_t n)
{
    if (*at + n > size)
        return -1;
    memcpy(out + *at, s, n);
    *at += n;
    return 0;
}

long hcp_http_rewrite(const char *buf, const struct hcp_http_req *req, char *out, size_t size)
{
    char first[HCP_HTTP_PATH_MAX + HCP_HTTP_HOST_MAX + 64];
    const char *eol = memchr(buf, '\n', req->head_len);
    const char *version = eol - 9;   /* "HTTP/1.x\r" */
    int n = req->port == 80
        ? snprintf(first, sizeof first, "%s %s %.8s\r\nHost: %s\r\n", req->method, req->path, version, req->host)
        : snprintf(first, sizeof first, "%s %s %.8s\r\nHost: %s:%d\r\n", req->method, req->path, version,
                   req->host, req->port);
    size_t at = 0, from = (size_t)(eol - buf) + 1, llen;
    const char *line;
    if (n < 0 || (size_t)n >= sizeof first || put(out, size, &at, first, (size_t)n) < 0)
        return -1;
    while (next_header(buf, req->head_len, &from, &line, &llen)) {
        const char *colon = memchr(line, ':', llen);
        if (hop_by_hop(line, (size_t)(colon - line)))
            continue;
        if (put(out, size, &at, line, llen + 2) < 0)
            return -1;
    }
    if (put(out, size, &at, "Connection: close\r\n\r\n", 21) < 0)
        return -1;
    return (long)at;
}

/* ---- chunked bodies ------------------------------------------------------ */

enum { CK_SIZE0, CK_SIZE, CK_EXT, CK_SIZE_LF, CK_DATA, CK_DATA_CR, CK_DATA_LF,
       CK_TR_START, CK_TR_LINE, CK_TR_LF, CK_END_LF, CK_DONE };

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

long hcp_chunked_feed(struct hcp_chunked *c, const char *p, size_t n, int *done)
{
    size_t i = 0;
    *done = c->st == CK_DONE;
    while (i < n && !*done) {
        char ch = p[i];
        switch (c->st) {
        case CK_SIZE0:
        case CK_SIZE:
            if (hexval(ch) >= 0) {
                if (c->left >> 56)
                    return -1;
                c->left = (c->st == CK_SIZE0 ? 0 : c->left * 16) + (uint64_t)hexval(ch);
                c->st = CK_SIZE;
            } else if (c->st == CK_SIZE && (ch == ';' || ch == ' ' || ch == '\t')) {
                c->st = CK_EXT;
                c->line = 0;
            } else if (c->st == CK_SIZE && ch == '\r') {
                c->st = CK_SIZE_LF;
            } else {
                return -1;
            }
            break;
        case CK_EXT:
            if (ch == '\r')
                c->st = CK_SIZE_LF;
            else if (ch == '\n' || ch == '\0' || ++c->line > 4096)
                return -1;
            break;
        case CK_SIZE_LF:
            if (ch != '\n')
                return -1;
            c->st = c->left ? CK_DATA : CK_TR_START;
            break;
        case CK_DATA: {
            size_t take = n - i < c->left ? n - i : (size_t)c->left;
            c->left -= take;
            i += take;
            if (c->left == 0)
                c->st = CK_DATA_CR;
            continue;
        }
        case CK_DATA_CR:
            if (ch != '\r')
                return -1;
            c->st = CK_DATA_LF;
            break;
        case CK_DATA_LF:
            if (ch != '\n')
                return -1;
            c->st = CK_SIZE0;
            break;
        case CK_TR_START:
            c->st = ch == '\r' ? CK_END_LF : CK_TR_LINE;
            c->line = 0;
            if (ch == '\n' || ch == '\0')
                return -1;
            break;
        case CK_TR_LINE:
            if (ch == '\r')
                c->st = CK_TR_LF;
            else if (ch == '\n' || ch == '\0' || ++c->line > 8192)
                return -1;
            break;
        case CK_TR_LF:
            if (ch != '\n')
                return -1;
            c->st = CK_TR_START;
            break;
        case CK_END_LF:
            if (ch != '\n')
                return -1;
            c->st = CK_DONE;
            *done = 1;
            break;
        default:
            return -1;
        }
        i++;
    }
    return (long)i;
}
