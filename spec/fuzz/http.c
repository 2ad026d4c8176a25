/* spec/fuzz/http.c — libFuzzer target for the egress proxy's request
 * parser (src/egress_http.c): what an attacker inside a call sends to its
 * proxy. The first byte splits the input: bit 0 picks the head parser or
 * the chunked-body framer, the rest of the byte is a split point for the
 * framer (bytes fed in two pieces must frame as in one).
 *
 * Checked, aborting on any violation:
 * - hcp_http_parse returns 0 (more needed), 1 (a request) or one of the
 *   documented statuses; on 1 the head length is within the input and
 *   ends with the blank line, the host is lower case and NUL-terminated,
 *   the port is 1..65535, a CONNECT has no path and a forward has an
 *   origin-form path ("/..."), and parsing a prefix of the head never
 *   gives a different request;
 * - hcp_http_rewrite into a buffer of every size up to its need either
 *   refuses (-1) or writes exactly that many bytes and never past them
 *   (ASan watches the exact-size buffer), starting with the method and
 *   the path and ending with the blank line;
 * - hcp_chunked_feed never claims more bytes than it was given and gives
 *   the same total fed whole or in two pieces. */
#include "egress.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "http: %s\n", what);
    abort();
}

static void check_request(const char *buf, size_t len, const struct hcp_http_req *r)
{
    if (r->head_len < 4 || r->head_len > len || memcmp(buf + r->head_len - 4, "\r\n\r\n", 4) != 0)
        fail("head length does not end with the blank line");
    if (strnlen(r->host, sizeof r->host) == sizeof r->host || r->host[0] == '\0')
        fail("host not terminated or empty");
    for (const char *h = r->host; *h; h++)
        if (*h >= 'A' && *h <= 'Z')
            fail("host not lower case");
    if (r->port < 1 || r->port > 65535)
        fail("port out of range");
    if (r->connect ? r->path[0] != '\0' : r->path[0] != '/')
        fail("path form");
}

static void check_rewrite(const char *buf, const struct hcp_http_req *r)
{
    for (size_t size = 0; size <= HCP_HTTP_HEAD_MAX + 512; size += size < 64 ? 1 : 97) {
        char *out = size ? malloc(size) : NULL;
        if (size && !out)
            abort();
        long n = hcp_http_rewrite(buf, r, out, size);
        if (n >= 0) {
            if ((size_t)n > size)
                fail("rewrite wrote past its buffer");
            if ((size_t)n < 4 || memcmp(out + n - 4, "\r\n\r\n", 4) != 0)
                fail("rewritten head does not end with the blank line");
            size_t ml = strlen(r->method);
            if ((size_t)n < ml + 1 || memcmp(out, r->method, ml) != 0 || out[ml] != ' ')
                fail("rewritten head does not start with the method");
            free(out);
            return;
        }
        free(out);
    }
}

static void fuzz_head(const char *buf, size_t len)
{
    struct hcp_http_req r;
    const char *why = NULL;
    memset(&r, 0, sizeof r);
    int st = hcp_http_parse(buf, len, &r, &why);
    if (st != 0 && st != 1 && st != 400 && st != 405 && st != 501 && st != 505 && st != 414 && st != 431)
        fail("unknown status");
    if (st >= 400 && !why)
        fail("a refusal without a reason");
    if (st != 1)
        return;
    check_request(buf, len, &r);
    /* the head alone parses to the same request */
    struct hcp_http_req again;
    memset(&again, 0, sizeof again);
    if (hcp_http_parse(buf, r.head_len, &again, &why) != 1 || again.port != r.port ||
        strcmp(again.host, r.host) != 0 || strcmp(again.path, r.path) != 0 || again.connect != r.connect)
        fail("the head alone parses differently");
    if (!r.connect)
        check_rewrite(buf, &r);
}

static long feed_all(const char *p, size_t n, size_t split)
{
    struct hcp_chunked c;
    int done = 0;
    memset(&c, 0, sizeof c);
    if (split > n)
        split = n;
    long a = hcp_chunked_feed(&c, p, split, &done);
    if (a < 0)
        return -1;
    if (a > (long)split)
        fail("chunked claimed more than it was given");
    if (done)
        return a;
    long b = hcp_chunked_feed(&c, p + split, n - split, &done);
    if (b < 0)
        return -1;
    if (b > (long)(n - split))
        fail("chunked claimed more than it was given");
    return a + b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *buf = malloc(size);   /* exact size: ASan sees any read past it */
    if (!buf)
        abort();
    memcpy(buf, data + 1, size - 1);
    if ((data[0] & 1) == 0) {
        fuzz_head(buf, size - 1);
    } else {
        size_t split = (size_t)(data[0] >> 1) * (size - 1) / 128;
        long whole = feed_all(buf, size - 1, size - 1), parts = feed_all(buf, size - 1, split);
        if ((whole < 0) != (parts < 0) || (whole >= 0 && whole != parts))
            fail("chunked framing depends on how the bytes arrive");
    }
    free(buf);
    return 0;
}
